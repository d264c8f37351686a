// Package train fits models: it compiles the training step, streams
// batches through it, evaluates, runs callbacks and writes checkpoints that
// resume exactly. It is the Keras-shaped layer over the engine (compile,
// fit, evaluate, predict, History, callbacks).
//
// In the life of a step, Fit does everything up front: it builds the model
// into a training graph (forward, loss, autodiff, optimizer update) and an
// evaluation graph, for the batch size and, when the data does not divide
// evenly, for the smaller last batch too; it compiles them all and reserves
// one arena as large as the largest, so the peak is known before step 1.
// planned_peak_bytes is that sum (weights and optimizer state, the arena,
// each program's input and output buffers, and the data set held in
// memory); the ledger's measured peak equals it byte for byte. Steps then
// run without allocating.
//
// Semantics, stated where Keras or PyTorch leave a choice:
//   - The last partial batch is trained on (Keras' default; PyTorch's
//     drop_last=False), through its own cached plan in the same arena.
//   - Shuffling draws a fresh permutation each epoch from (seed, epoch);
//     dropout masks come from (seed, layer, step). So a run is a pure
//     function of its seed on the same machine and thread count, and a run
//     resumed from an epoch-end checkpoint continues bit for bit.
//   - The loss is the mean over the batch (Keras' sum_over_batch_size).
//     Reported epoch loss is the mean of the batch losses; accuracy counts
//     argmax(logits) == label for sparse categorical cross-entropy.
//   - Checkpoints are written at epoch ends (Keras ModelCheckpoint's
//     default) as safetensors with every variable (weights, non-trainable
//     statistics and optimizer state) and the step, epoch and seed as
//     metadata; Resume loads the newest that loads.
//   - Gradients are temporaries of the step's arena (counted as grad in the
//     plan): they are consumed by the update in the same step and never
//     kept, which saves a copy of the weights compared with frameworks that
//     keep .grad buffers.
package train
