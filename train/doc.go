// Package train fits models: it compiles the training step, feeds batches
// through it, evaluates, runs callbacks and writes checkpoints that resume
// exactly. It is the Keras-shaped layer over the engine (compile, fit,
// evaluate, predict, History, callbacks), and the one way through it: the
// command, the tests and a user's program all train through New and Fit.
//
// Terms:
//   - Data: what a run trains on and evaluates at each epoch's end, one
//     type for every source: InMemory (data.Examples and a held-out set),
//     Pipeline (a data.Dataset of batches), OnText (byte-level text for a
//     language model) and FromSet (a data.Set that can be loaded or
//     streamed: the user's files, the built-in data sets); Augment adds an
//     augmentation pipeline to examples held in memory. Described is data
//     known by its description alone, which only plans.
//   - RunPlan: what a run reserves, known before anything is reserved or
//     read (PlanFor): the programs' session (runtime.Reserve), the examples
//     held in memory and the input pipeline's reservation, by category.
//   - Trainer (New): the run's programs reserved as one runtime.Session on
//     a new engine, its data held or streamed, its weights drawn.
//   - feed: how Fit gets an epoch's batches from the data (examples in a
//     fresh order, a pipeline's next pass, text windows); Fit's loop is one
//     loop for all of them (fit.go, feed.go).
//   - ProcessBudget: a whole process's memory budget (--budget, else the
//     container's or the machine's limit) and what it leaves a plan.
//   - Live (Config.Live; LiveBudget follows a container's limit): the
//     memory a run may reserve now, read at each step boundary. Below the
//     running plan, the next step runs on a rung of a ladder of cheaper
//     plans (more micro-batches, then recomputation, then mixed_bfloat16
//     with LivePrecision), the freed memory given back to the OS first;
//     with room again for LiveSettle it grows back; with no rung left it
//     checkpoints and returns *BudgetExhausted (follow.go). A data-parallel
//     run agrees at each boundary, so every rank stops (an interrupt on
//     any) and re-plans at the same step.
//   - Predictor and Generator: inference through a plan of its own (the
//     forward pass only; a language model's one-token decoding step with
//     its cache), on a session of their own.
//
// In the life of a step, New does everything up front. It decides how the
// data is read: a FromSet data set bigger than half the budget is
// streamed from its storage each epoch when it can be (as tf.data reads a
// data set that does not fit beside the model), else loaded. It builds the
// model into a training graph (forward, loss, autodiff, optimizer update)
// and an evaluation graph, for the batch size and, when the data does not
// divide evenly, for the smaller last batch too; it compiles them all and
// plans one arena as large as the largest. The plan, with the data held in
// memory and the input pipeline's reservation, is checked against the
// budget before a data set is loaded, generated or read: a run that cannot
// fit is refused naming a batch that fits, without having taken its
// memory. Then it loads the data, reserves everything and draws the
// weights, so the peak is known before step 1. planned_peak_bytes is that
// sum (weights and optimizer state, the arena, each program's input and
// output buffers, the data held in memory, the pipeline's reservation);
// the ledger's measured peak equals it byte for byte: the input pipeline's
// buffers come out of its reservation (a ledger of its own whose budget is
// the reservation), and backpressure keeps them within it. Steps then run
// without allocating.
//
// Language models on text: a model of one int32 input of T tokens trains
// on batches of windows of T+1 bytes, each step's windows drawn uniformly
// at random from (seed, step), so a resumed run draws the same; its
// validation loss is reported in nats per byte. The text's files are
// listed, planned by their sizes and read once the plan fits.
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
//     refused naming both shapes and the loss (New and PlanFor).
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
//     derives it from the whole process's budget (ProcessBudget: --budget,
//     else the container's or machine's limit) less the process itself, on
//     every path (examples, streams, text).
//   - The input pipeline (augmentation, a streamed data set, a Pipeline)
//     gets one budget, data.PipelineBudget (6 batches in flight, at least
//     8 MiB) unless Config.InputBudget says otherwise, reserved in the plan.
//   - A model file is one format for every model: a language model's is a
//     model file too (its architecture, or its registered name, window and
//     vocabulary), which Generator reads.
//   - A run shorter than Config.Warmup steps reports its samples per second
//     over all its steps (a run's speed is never 0).
//   - Gradients are temporaries of the step's arena (counted as grad in the
//     plan): they are consumed by the update in the same step and never
//     kept, which saves a copy of the weights compared with frameworks that
//     keep .grad buffers.
//   - A model file (SaveModel, LoadModel) holds the model's weights (no
//     optimizer state) and, as metadata, its architecture, loss and the
//     data's preprocessing, as Keras' model.save; LoadWeights sets a
//     trainer's weights from one (Keras' load_weights).
//   - Predictor runs inference or evaluation through a plan of its own (the
//     forward pass only: no labels for inference, no gradients, no
//     optimizer state), streamed from a pipeline. A batch runs as
//     micro-batches of PredictConfig.MicroBatch: in inference no layer
//     couples the examples of a batch, so the outputs are the same and the
//     arena holds one micro-batch's activations.
package train
