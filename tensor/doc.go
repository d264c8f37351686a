// Package tensor defines the element types (DType), shapes and broadcasting
// rules shared by every other headroom package, and Tensor, a typed host view
// over a byte buffer that headroom does not own through the Go heap.
//
// Terms:
//   - DType: an element type. Float32 and Float64 are compute types; Float16
//     and BFloat16 are 16-bit storage types (converted with round-to-nearest-
//     even); Int32, Int64 and Uint8 hold indices, labels and pixels; Bool is
//     the result of a comparison, one byte per element (0 or 1).
//   - Shape: the size of each dimension, row-major (the last dimension is
//     contiguous). A scalar has the empty shape [] and one element.
//   - Broadcasting: NumPy's rule. Shapes are aligned on their last dimension;
//     two sizes are compatible when equal or when one of them is 1.
//   - Tensor: (dtype, shape, bytes). It is a view: it never copies or owns the
//     memory it points at, which is usually a slice of an mmap'd arena.
//
// In the life of a step, tensor is the vocabulary: graph nodes carry a DType
// and a Shape, the planner sizes buffers with Shape.Size()*DType.Size(), and
// the runtime hands users Tensor views into its arena.
//
// tensor imports nothing else of headroom.
package tensor
