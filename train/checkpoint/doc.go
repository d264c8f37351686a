// Package checkpoint reads and writes training checkpoints as safetensors
// files, the Hugging Face format, so a checkpoint opens in that ecosystem
// (safetensors.safe_open, safetensors.numpy.load_file, ...) and a resumed run
// continues exactly where it stopped.
//
// Terms:
//   - Checkpoint: one file holding named tensors (weights, optimizer state)
//     and string metadata (step, epoch, RNG state, data position).
//   - Header length: the first 8 bytes, N as a little-endian uint64.
//   - Header: the next N bytes, a UTF-8 JSON object. The key "__metadata__"
//     maps to an object of string values; every other key names a tensor and
//     maps to {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}.
//     The writer pads the header with spaces to a multiple of 8 bytes, so the
//     data section starts 8-byte aligned.
//   - Data section: the rest of the file, raw little-endian row-major tensor
//     data. data_offsets are relative to its start. The tensors tile it
//     exactly: in offset order each begins where the previous ended, holds
//     shape*dtype bytes, and the last ends at the end of the file (no holes,
//     no overlaps, no trailing bytes). A scalar has shape []; a tensor with a
//     zero dimension holds no bytes.
//   - dtype codes: F32, F64, F16, BF16, I32, I64, U8, BOOL map to
//     tensor.Float32, Float64, Float16, BFloat16, Int32, Int64, Uint8, Bool.
//     Files with other codes (I8, U16, F8_E4M3, ...) are rejected.
//   - Entry: a name and a tensor.Tensor. Save copies bytes out of the view;
//     Load returns tensors backed by Go memory it allocated (8-byte aligned).
//   - *FormatError: a file that is not a valid checkpoint. It names the file
//     and the byte offset of the fault (0 for the length field, 8+i inside
//     the header, 8+N+i inside the data section).
//
// Reading is bounded: Load reads the 8-byte length, refuses a header over
// 100 MB or past the end of the file, reads and checks the header and the
// whole layout against the file size, and only then reads each tensor into a
// buffer of its checked size. A corrupt file cannot make it allocate more
// than the file holds, and no input makes it panic (FuzzParse).
//
// # Atomic writes
//
// Save never writes to the destination path. Through package atomicfile
// (the protocol every file headroom writes goes through) it writes a hidden
// temporary file in the same directory (".<name>.tmp-<random>"), fsyncs it,
// renames it over the destination and fsyncs the directory:
//   - The temporary file lives in the same directory because rename(2) is
//     atomic only within one file system: a reader, or a process restarted
//     after a crash, sees the old file or the new one, never a mixture.
//   - fsync before rename makes the data durable before the name points at
//     it; without it a power loss can leave the new name on a file whose
//     blocks were never written (zeros or garbage with the right size).
//   - fsync of the directory makes the rename itself durable; without it the
//     directory entry can revert to the old file after a power loss even
//     though Save returned.
//
// A process killed at any moment therefore leaves the destination intact
// (old or new content), plus perhaps a temporary file, which SaveStep deletes
// on its next call. On any error Save removes its temporary file and the
// previous file at the path is untouched, unless only the final directory
// fsync failed: then the path holds the new, complete file and Save still
// returns the error.
//
// Save also stores a CRC-32C (Castagnoli) of the data section under
// "data_crc32c", and Load checks it when present, so a data block corrupted
// after the write (by the disk, a bad copy) is detected rather than trained
// on. Files written by other tools need not have it.
//
// # Training runs
//
// SaveStep writes dir/ckpt-<step>.safetensors (the step in 10 or more digits,
// so names sort by step) and keeps the newest few. Latest returns the newest
// checkpoint that validates, falling back to older ones if the newest is
// damaged; it is how a run resumes. One process writes a directory at a time.
//
// A sharded checkpoint (sharded.go) is written by the processes of a
// data-parallel run together: each its part, dir/ckpt-<step>-<i>-of-<n>.safetensors
// (SavePart), then one of them the index that commits them,
// dir/ckpt-<step>.safetensors.index.json (SaveIndex), Hugging Face's
// sharded layout (a weight_map from tensor names to part files, and the
// metadata). Latest and LoadInto take an index where they take a file; a
// step whose index is missing, or one of whose parts is missing or damaged,
// is passed over like a damaged file.
//
// # Metadata keys
//
// The format allows only string values in "__metadata__", so numbers and
// bytes are encoded as strings. headroom's keys are lower snake_case:
//   - "step" (KeyStep): optimizer steps taken, a decimal int64 (strconv);
//     SaveStep sets it.
//   - "epoch" (KeyEpoch): epochs completed, decimal.
//   - "rng_state" (KeyRNGState): the trainer's random generator state, as
//     base64 (standard encoding) of its binary form.
//   - "data_position" (KeyDataPosition): where the input pipeline resumes,
//     in the pipeline's own string form (opaque to this package).
//   - "data_crc32c" (KeyDataCRC32C): set by Save; 8 lowercase hex digits.
//
// Other components may add keys under their own prefix ("optim.lr",
// "data.shuffle_seed"). Tensor names are the caller's to choose.
//
// In the life of a step, checkpoint sits outside the step: the trainer calls
// SaveStep between steps (every N steps or at epoch ends) with views of the
// runtime's parameter and optimizer-state buffers, and calls Latest and Load
// once before the first step of a resumed run.
package checkpoint
