// Package datasets loads the data sets the headroom command trains on:
//   - digits: 1,797 8x8 handwritten digits (UCI, CC BY 4.0, see DIGITS.md),
//     embedded in the binary, split into a fixed 1,437 for training and 360
//     (20%) held out for testing;
//   - fashion-mnist: 60,000 + 10,000 28x28 grey images from Debian's
//     dataset-fashion-mnist package (gzipped IDX files);
//   - synthetic: the peers' workload: N(0,1) float32 features labelled by
//     the argmax of a fixed random linear teacher, generated in-process;
//   - shapes: a segmentation set generated in-process: grey images of
//     disks, rectangles and triangles with a class label per pixel.
//
// Each is also a data.Set (DigitsSet, FashionMNISTSet, SyntheticSet,
// ShapesSet) that describes itself from constants or file headers before
// anything is read, so a trainer can refuse a run or choose to stream it
// without having loaded or generated it: Fashion-MNIST streams from its
// IDX file, the synthetic set is generated again each epoch; the digits
// and shapes are small and only loaded. GoSrcSet lists go-src's files
// for a language model without reading them.
//
// Images are kept as uint8 pixels and scaled to [0, 1] as each batch is fed
// (digits: /16, Fashion-MNIST: /255), so a data set costs one byte a pixel.
// Errors name the file and the byte offset of bad input.
package datasets
