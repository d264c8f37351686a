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
//     resumed from any checkpoint continues bit for bit.
//   - The loss is the mean over the batch (Keras' sum_over_batch_size).
//     Reported epoch loss is the mean of the batch losses; accuracy is
//     Keras' "accuracy": argmax of an output of one value per class against
//     the data's class label, or a single output against a 0/1 label (at 0
//     for logits, 0.5 for a sigmoid's probabilities); NaN where neither
//     applies (regression targets).
//   - The model and its labels must agree, before step 1: the loss says
//     what label it needs for the model's output (shape, dtype); class
//     labels are one-hot encoded for a loss over distributions (mean
//     squared error, binary cross-entropy with one output per class), as a
//     Keras user gives these losses categorical targets; anything else is
//     refused naming both shapes and the loss (CheckData).
//   - Checkpoints are written at epoch ends (Keras ModelCheckpoint's
//     default), every CheckpointEvery steps, when MaxSteps cuts an epoch
//     short and when Interrupt fires (SIGTERM), as safetensors with every
//     variable (weights, non-trainable statistics and optimizer state) and
//     the exact position as metadata: epochs done, batches of the epoch in
//     progress done, that epoch's running sums, the seed, the loss scale.
//     Resume loads the newest that loads, straight into the variables.
//   - Under a 16-bit precision policy the trainer plans the policy and
//     float32 and keeps float32's layout when 16-bit activations do not
//     pay on the model (StorageChoice): a policy never plans more than
//     float32.
//   - Config.Budget is what the plan may reserve on the ledger; the command
//     derives it from the whole process's budget (--budget, else the
//     container's or machine's limit) less the process itself.
//   - Gradients are temporaries of the step's arena (counted as grad in the
//     plan): they are consumed by the update in the same step and never
//     kept, which saves a copy of the weights compared with frameworks that
//     keep .grad buffers.
package train
