// Package step is the public step builder: given a model (nn.Model), a loss,
// an optimizer and options, it builds the graphs a run compiles (a
// training step, an evaluation step, an inference step) as a sequence of
// small, named graph transforms. Package train, `headroom plan`, the tests,
// the simulated device and a user's own training loop all build their
// steps here, so what a training step is lives in one place.
//
// In the life of a step it comes first: Builder declares the model's
// inputs, builds the model (nn), the loss and its labels; Minimize adds
// the backward pass (autodiff) and hands every gradient through the
// transforms to the optimizer (optim); compile then plans the graph.
//
// Terms:
//   - Mode: what the step does. Train: forward, backward, update. Eval:
//     forward, the summed loss and the outputs. Infer: forward and the
//     outputs only (no labels, no gradients, no optimizer state).
//     Accumulate and Apply are the micro-batches of one update: Accumulate
//     adds its weighted gradients to persistent accumulators; Apply does so
//     and updates from the sum, then resets them.
//   - Transform: one named rewrite of the training step. A transform may
//     rewrite what is differentiated (Target: float16 loss scaling), see or
//     consume each gradient as soon as the backward pass has made it final
//     (Grad: micro-batch accumulation, a data-parallel rank's weight,
//     gradient buckets, ZeRO's reduce-scatters, the optimizer's update), bring
//     consumed gradients back (Collect: waiting for the buckets'
//     all-reduces) and act once every gradient has gone through (Finish:
//     the overflow check and step guard of loss scaling, clipping by
//     global norm, the update). Transforms run in the order Transforms
//     lists them; a step's transforms are printed by its Describe.
//   - Interleaving: when no transform needs every gradient at once (no
//     clipping, no overflow check), each gradient runs through the Grad
//     hooks the moment it is final, so each parameter is updated inside the
//     backward pass and gradients never all live at once.
//   - Precision: a typed policy (Float32, MixedBFloat16, MixedFloat16;
//     ParsePrecision reads Keras' names), not a string: MixedBFloat16
//     builds the step's graph with graph.BF16Products, fixed when the graph
//     is made.
//   - ModelSpec (Describe): a model built once, at batch 1, to read its
//     outputs (with their losses' labels) and its variables (with their
//     initializers) before any step is compiled.
//   - Recomputation (Remat) and 16-bit storage of saved activations
//     (Precision) work through the layer boundaries the model records in
//     its nn.Context: keep every ⌈√L⌉-th boundary (Chen et al., "Training
//     Deep Nets with Sublinear Memory Cost", 2016) and recompute the rest;
//     keep each boundary but a model output in 16 bits.
//   - ZeRO (Config.Zero, zero.go, gathers.go): stage 1 reduce-scatters
//     each gradient and updates this process's block with block-sized
//     optimizer state; stage 2 reduce-scatters gradient buckets while
//     backward goes on (Early: even when clipping needs every gradient,
//     only blocks are kept); stage 3 also holds each trainable weight as a
//     block (nn.Context.Shards), gathering a layer's weights before its
//     forward (prefetching the next layer's) and again before its backward
//     (autodiff.Options.Refetch). Builder.Shards are then the block
//     variables, Params the whole weights the forward read.
//   - Labels: each output with a loss has a label input ("y" for a model
//     with one output, "y_<i>" otherwise) whose shape and dtype the loss
//     declares (nn.Loss.LabelShape, LabelType); LabelSpecs lists them so a
//     caller can check its data before step 1.
//
// Names the compiled programs use: the inputs of a Sequential model are
// "x"; other models' inputs keep their names. Outputs: "loss" (train: the
// batch's mean loss; eval: the sum of per-example losses), "out" (output
// 0: in training the logits a loss read, in evaluation and inference what
// the model computes, e.g. probabilities after a final softmax), "out_<i>"
// for further outputs, and "finite" under float16 loss scaling.
package step
