// Package autodiff adds the backward pass to a graph: Grad(loss, wrt...)
// appends the nodes that compute d loss / d w for each w, by reverse-mode
// accumulation over one table of vector-Jacobian product (VJP) rules, one
// rule per op (rules.go).
//
// In the life of a step it runs after the model and loss are built and
// before the optimizer's update: the nodes it builds carry the Backward
// phase, so the planner can tell saved activations (forward values read by
// backward nodes) from temporaries.
//
// Conventions, as in JAX and TensorFlow:
//   - loss must be a floating-point scalar; its seed gradient is 1.
//   - a w that the loss does not depend on gets a zero gradient (JAX's
//     convention; TensorFlow returns None).
//   - integer and bool inputs (labels, indices, masks) get no gradient.
//   - ties in Maximum/Minimum send the gradient to the first operand; ties in
//     ReduceMax share it equally (as TensorFlow's reduce_max).
//   - the internal gradient ops (relu_grad, ...) have no rules: headroom does
//     not take second derivatives, and Grad panics with a *graph.Error naming
//     the op if asked to.
package autodiff
