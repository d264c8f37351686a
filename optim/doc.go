// Package optim writes optimizer updates as graph ops, so that a training
// step (forward, backward and update) is planned as one program: the
// optimizer's state (momentum, Adam's m and v) is made of graph Variables
// with the optstate role, charged to the ledger like every other byte, and
// its updates are Assigns the planner turns into in-place writes.
//
// Terms:
//   - Optimizer: Apply(g, params, grads) appends the update of each param.
//   - Hyper inputs: scalars that change from step to step (the learning
//     rate from a Schedule, Adam's bias corrections) are graph Inputs the
//     trainer fills before each step from Optimizer.Feed; they cost a few
//     bytes and keep the graph, and so the plan, the same for every step.
//   - Schedule: the learning rate as a function of the step: Constant,
//     StepDecay, Cosine, and Warmup (linear warm-up before another schedule).
//   - ClipByGlobalNorm rescales every gradient by min(1, c/‖g‖) where ‖g‖ is
//     the norm of all gradients together (Pascanu et al., 2013), as
//     tf.clip_by_global_norm and torch.nn.utils.clip_grad_norm_.
//
// The update rules follow PyTorch's torch.optim (the project's peer):
//   - SGD: b = μ·b + g; w -= lr·(g + μ·b) with Nesterov, w -= lr·b without;
//     plain SGD when μ = 0. Weight decay adds wd·w to g first.
//   - Adam (Kingma and Ba, 2015): m = β1·m + (1-β1)·g, v = β2·v + (1-β2)·g²,
//     w -= lr/(1-β1ᵗ) · m / (√v/√(1-β2ᵗ) + ε).
//   - AdamW (Loshchilov and Hutter, 2019): Adam with decoupled weight decay,
//     w -= lr·wd·w before the Adam step.
//
// Defaults: Adam β1 0.9, β2 0.999, ε 1e-8 (PyTorch's; Keras uses ε 1e-7);
// AdamW weight decay 0.01; SGD momentum 0.
package optim
