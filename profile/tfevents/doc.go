// Package tfevents writes and reads TensorBoard event files: TFRecord
// framing (length, masked CRC-32C of the length, data, masked CRC-32C of
// the data) around tensorflow.Event protocol buffers, encoded with
// protowire. EventWriter appends scalar summaries (the values Keras'
// TensorBoard callback logs) to a new file in a directory; ReadEvents reads
// one back, and a damaged record is a *FormatError naming its offset.
//
// It stands apart from package profile so that package train's TensorBoard
// callback can write events without train and profile importing each other.
package tfevents
