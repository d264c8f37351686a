// Package data is headroom's input pipeline: datasets larger than memory,
// streamed from disk under a hard RAM budget, with tf.data's vocabulary.
//
// # Terms
//
//   - Dataset[T]: a recipe for a stream of elements of type T, a source and
//     the stages applied to it. It holds no data and starts nothing.
//   - Pass: one iteration over a Dataset, opened by Dataset.Iter (an
//     *Iterator with Next and Close) or Dataset.All (a range-over-func
//     sequence). Each pass has its own buffers, goroutines, stats, and a
//     sub-ledger of the host ledger with the pipeline's budget.
//   - Source: FromSlice, FromTensors (views, no copies), FixedLengthRecords,
//     TFRecords (with ParseExample for tf.train.Example), CSV (typed columns),
//     NPY and NPZ, IDX (MNIST), ImageFolder (PNG, JPEG), Files (a glob).
//   - Stage: Map (parallel, ordered or not), Filter, Shuffle, Batches,
//     Prefetch, Cache (memory or file), Repeat, Take, Skip, Shard, Interleave.
//   - Element: any T. Record (raw bytes from a file), Sample (X and Y
//     tensors) and Batch (stacked samples, what a trainer consumes) hold
//     pooled memory; Example and Row are parsed records.
//   - Block: a reference-counted buffer from the pass's arena, charged to
//     the ledger (category input, owner: the stage that asked for it).
//   - Budget: the most bytes a pass's buffers may hold, all stages together
//     (Config.Budget, DefaultBudget when unset). It is a limit, not a hint.
//     A trainer or predictor sizes it with PipelineBudget (one formula for
//     every path) and reserves it in its plan.
//   - Set: a data set that says what it holds before it is read (Describe,
//     Bytes) and can be read whole (Load) or streamed each epoch (Stream):
//     UserFiles (a Source with its validation split) and the built-in
//     sets of package datasets. A trainer asks first, so that the memory a
//     run takes is checked before a data set is loaded or generated.
//   - Generate: a source whose passes each run a fresh generator (a
//     synthetic data set regenerated each epoch instead of held).
//
// # Sources of examples
//
// A Source (source.go) is a data set in the user's files as `headroom
// train --data` names it: CSV, NPY/NPZ, an image folder, TFRecord, IDX.
// Open streams it as samples, Load reads it into Examples, Stream reads it
// for training epoch by epoch without holding it; its Preprocessing (class
// names, columns, image size, scale) is kept in model files so new data is
// read the same way. SplitValidation is Keras' validation_split. Sources
// never write to the user's files.
//
// # Where it sits in the life of a step
//
// The pipeline runs beside training: a trainer pulls one Batch per step from
// an Iterator (train adapts a Dataset[Batch]); Prefetch keeps the next batches
// ready in a goroutine while the step computes. Batch.X is [B, x...] and
// Batch.Y is [B, y...], host tensors in pipeline memory that the trainer copies
// into its staging buffers before calling Next again.
//
// # Memory
//
// Every buffer of a pass comes from its arena: free lists per stage and size
// class (1/16 of a power of two apart, 64-byte aligned), charged to the
// pass's sub-ledger when the arena grows and released when a free buffer is
// dropped, so the ledger's live bytes are what the pass holds, in use or
// free. Buffers are recycled: in a steady state a pass allocates nothing. A
// request the budget refuses first drops free buffers of other sizes, then
// waits until an element is released (backpressure): a pass never grows
// past its budget, it slows down. A request that cannot fit beside the
// stages' own buffers (read buffers) fails at once with an error wrapping
// *mem.OOMError instead of waiting forever.
//
// Stages that gather elements are bounded so that a full budget cannot
// deadlock the pass: Shuffle's buffer holds at most half the budget, a
// parallel Map's chunks in flight at most a quarter (and it passes on a
// partial chunk when the budget is short), Autotune grows only within the
// budget and leaves a reserve (two of the largest buffers asked for) for the
// rest. Small bookkeeping (a Shuffle's slots, a Prefetch's queue) is charged
// too. Go-heap garbage remains for a few things: parsed CSV rows, decoded
// images before they are copied into a Block, Example feature lists.
//
// # Goroutines and cancellation
//
// Iterators are explicit (Next/Close) rather than iter.Pull, because their
// clean-up is then provable: every goroutine a stage starts (Map's
// dispatcher and workers, Prefetch's producer, a source's read-ahead) is
// tracked by the stage and waited for in its close, and Close closes every
// stage, so when Close returns no goroutine of the pass is running (the test
// checks runtime.NumGoroutine). The context given to Iter ends the pass too:
// its goroutines return and Next reports ctx.Err(). An Iterator dropped
// without Close has its context cancelled by a runtime cleanup, but its
// memory stays charged until Close: call Close (All does it for you, on
// break too).
//
// An element returned by Next is valid until the next call to Next, which
// releases it (like bufio.Scanner's token); Retain it (Record, Sample, Batch)
// to keep it longer and Release it when done. A Map function owns its input
// only for the call; an output that views the input's memory holds a
// reference of its own (NewSample(x, y, rec.Block())).
//
// # Autotune and stats
//
// Map(..., Parallel(Autotune)) starts with one worker and adds one while its
// consumer waits on it and its workers are busy, as long as each increase
// raises throughput and the budget holds the elements the workers keep in
// flight. Prefetch(Autotune) starts at depth 2 and deepens while the consumer
// waits on an empty buffer although the producer sometimes found it full.
// Every pass counts, per stage, elements, bytes, time producing, time waiting
// on its input, time blocked on a full buffer, and its consumer's wait;
// Stats.Summary names the stage that explains most of the consumer's wait
// ("map(decode) is the bottleneck: 92% of consumer wait ...").
//
// # Errors
//
// A corrupt or truncated record is a *FormatError naming the file and the
// byte offset of the record (decompressed offsets for gzip; "a.npz[x.npy]"
// for an npz entry). Config.OnError chooses Fail (the default) or Skip, which
// drops the record, counts it in StageStats.Skipped and goes on where the
// format allows it (else it ends that file).
//
// # Where headroom differs from tf.data, and why
//
//   - Budget: tf.data's AUTOTUNE treats RAM as a hint and a big shuffle or
//     prefetch buffer can take the host down; here every buffer is charged
//     and a full budget makes stages wait. Shuffle(buffer) therefore holds at
//     most half the budget: a buffer that would not fit is cut (Stats reports
//     the size reached) rather than grown. The order stays a function of the
//     seed and the input, since the cut depends only on element sizes.
//   - Element lifetime: elements are recycled, valid until the next Next
//     (tf.data hands out fresh tensors and lets the GC find them).
//   - Shuffle seed: always explicit, and the same seed gives the same order
//     on every pass; reshuffling per epoch (reshuffle_each_iteration=True)
//     happens under Repeat, which reopens the shuffle with the next epoch.
//   - Batches is a function (Go methods cannot change the element type), the
//     last partial batch is kept unless dropRemainder, and samples must share
//     shapes (no padded_batch).
//   - Map's default is sequential, as tf.data without num_parallel_calls;
//     Parallel(n) keeps input order unless Unordered (deterministic=False).
//     Parallel work is handed to workers in chunks sized to about 1 ms of
//     work, so cheap functions do not pay a goroutine wake-up per element.
//   - File sources read ahead in a goroutine (up to 16 reads, at most a
//     sixteenth of the budget), so the disk keeps streaming while the
//     pipeline computes; tf.data relies on the OS and on explicit prefetch.
//     FixedLengthRecords reads straight into the records' blocks with
//     readv (one copy, the kernel's) and, on Linux, asks the kernel to read
//     32 MiB further ahead (POSIX_FADV_WILLNEED).
//   - Cache(""): per pass, bounded by the budget (an error, not an OOM kill,
//     when the data outgrow it); Cache(path) writes checksummed TFRecord
//     frames and renames the file into place only after a complete pass.
//   - Interleave's Parallel(n) reads ahead in each inner dataset (a Prefetch)
//     rather than running n map calls; the order is tf.data's deterministic one.
//   - ImageFolder does not resize unless asked and does not shuffle (use
//     Shuffle); CSV needs Header set explicitly and column types given (or
//     all float32).
package data
