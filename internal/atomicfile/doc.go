// Package atomicfile writes every file headroom writes (checkpoints,
// profiles, exports, prediction outputs, data caches) with one protocol, so
// that a reader, or a run after a crash, sees at a path either its previous
// content or the complete new file, never part of one.
//
// Terms:
//   - Target: the path being written.
//   - Temporary file: a hidden file beside the target,
//     "." + base + TempInfix + random (ParseTemp recognizes one), in the same
//     directory so that renaming it over the target is atomic.
//   - Protocol: create the temporary file (mode perm before the umask, as
//     os.OpenFile; 0o666 gives what os.Create gives), write it, fsync it,
//     close it, rename it over the target, fsync the directory. Until the
//     rename the target is untouched: an error at any earlier step removes
//     the temporary file and leaves the target byte for byte as it was.
//     After the rename the target holds the complete new file; if only the
//     final directory fsync fails, the error is still returned, because the
//     rename may not survive a power loss (undoing it could not be made
//     durable either, with the directory failing to sync).
//   - Pending: a file being written that is not yet at its target (Create):
//     streamed into, then committed (the rest of the protocol) or aborted
//     (the temporary file removed). WriteFile is Create, a write from a
//     func(io.Writer) error through a buffer, and Commit.
//   - FS: the seam through which the protocol touches the disk, in the
//     manner of pebble's vfs: OS is the operating system's; a test passes
//     one that fails on purpose (package faultfs) to check what each failure
//     leaves behind.
//
// Errors name the step that failed and the file it concerns (the target,
// the temporary file or the directory) and wrap the file system's error;
// callers add their own prefix.
//
// In the life of a step this package sits at the edges: train/checkpoint
// saves through it, and profile, data (the NPY writer and the disk cache),
// the benchmarks and the command write their files with it.
package atomicfile
