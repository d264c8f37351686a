// Package cli implements the headroom command's subcommands: train and
// plan (flags, a data set, a model, handed to package train; the memory
// plan, progress and the RESULT line), evaluate, predict and export (a
// model file read with train.LoadModel, run through an inference plan or
// written with export/onnx) and version. The user's own data (--data) is
// read by data.Source. cmd/headroom only calls Main; help goes to stdout.
//
// Every failure reaches the user as one line on stderr and a non-zero exit
// status; a panic (a bug) is reported the same way, without a trace.
package cli
