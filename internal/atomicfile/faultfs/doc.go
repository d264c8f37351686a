// Package faultfs is an atomicfile.FS for tests that fails one step of the
// atomic-write protocol on purpose, so a test can check what each failure
// leaves on disk (in the manner of pebble's vfs/errorfs).
//
// Terms:
//   - Op: a step of the protocol that can fail: Create (the temporary
//     file), Write (any write to it), Sync, Close, Rename, SyncDir. Ops
//     lists them in the order the protocol takes them.
//   - Fault: an FS with At set fails that step with Err (ErrInjected if
//     nil). A failed Write writes half of its bytes first, as a full disk
//     would; a failed Close closes the file first; the other steps fail
//     without doing anything. Every other call goes to Base.
package faultfs
