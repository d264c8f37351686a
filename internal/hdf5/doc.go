// Package hdf5 reads and writes the subset of HDF5 that Keras uses for
// model files: legacy full-model .h5 files (model.save("x.h5") in Keras 1,
// 2 and 3), weights-only .h5 files (save_weights), and the
// model.weights.h5 inside a Keras 3 .keras archive.
//
// It sits outside the life of a step: nn/keras turns the groups,
// datasets and attributes it reads into a model config and weights, and
// writes a trained model's weights back in Keras 3's layout.
//
// # Why a reader of our own
//
// No pure-Go HDF5 module is served by the Go module proxy this project
// builds from (github.com/scigolib/hdf5 and its forks, go-hdf5/hdf5 were
// checked: none is listed), and gonum/hdf5 needs cgo and libhdf5, which
// DESIGN.md rules out of the default build. Keras writes a small part of
// the format, so headroom reads that part, checked against files written
// by h5py (libhdf5 1.10) and by Keras 1.1 to 3.15.
//
// # Terms
//
// A file holds objects: groups (named links to other objects) and
// datasets (an n-dimensional array of one datatype). Both carry
// attributes (small named values: strings, numbers). An object is found
// by its address: a byte offset in the file, relative to the superblock's
// base address. Errors are *FormatError values naming the file and the
// byte offset of the structure that is wrong.
//
// # What is read
//
//   - superblock versions 0, 1, 2 and 3 (a user block before it included);
//   - object headers version 1 and 2, with continuation blocks;
//   - groups stored as symbol tables (a version 1 B-tree of symbol table
//     nodes, names in a local heap), as link messages in the header
//     (compact), and as dense link storage (a fractal heap indexed by a
//     version 2 B-tree); hard links only (soft and external links are
//     refused, as Keras refuses them);
//   - attributes in the header or in dense attribute storage;
//   - datatypes: little-endian integers (8 to 64 bits), IEEE floats of 16,
//     32 and 64 bits, bfloat16 (a 16-bit float with an 8-bit exponent, or
//     Keras' 2-byte data tagged dtype="bfloat16"), fixed-length strings
//     and variable-length strings (in the global heap);
//   - dataset storage: compact, contiguous and chunked (a version 1 B-tree
//     of chunks, or a version 4 layout's single chunk, implicit or fixed
//     array index), chunks deflate-compressed (with or without shuffle) or
//     not, Fletcher-32 checked.
//
// Checksums of version 2 structures are verified. Bad input (a truncated
// file, a size that lies, a loop in the groups, a dataset larger than the
// file) ends in a *FormatError, never a panic (FuzzOpen).
//
// # What is written
//
// Writer writes superblock version 2 files: groups as link messages in
// version 2 object headers, contiguous datasets of float16, float32,
// float64 and int64 values, and attributes (fixed-length strings and
// numbers): what Keras 3's H5IOStore reads, and what h5py opens.
package hdf5
