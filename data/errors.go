package data

import (
	"errors"
	"fmt"
)

// FormatError reports a corrupt or truncated record: the file, the byte
// offset where the bad record (or field) starts, and what was wrong. For
// gzip-compressed files the offset is in the decompressed stream; for an
// entry of an .npz archive File is "archive.npz[entry.npy]". Use
// errors.As(err, &fe) with fe of type *FormatError.
type FormatError struct {
	Format string // "tfrecord", "csv", "npy", "idx", "records", "image", ...
	File   string
	Offset int64
	Msg    string
	Err    error // the underlying cause, if any (io.ErrUnexpectedEOF, ...)
}

func (e *FormatError) Error() string {
	s := fmt.Sprintf("data: %s %s at byte %d: %s", e.Format, e.File, e.Offset, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(format, file string, off int64, cause error, msg string, args ...any) *FormatError {
	return &FormatError{Format: format, File: file, Offset: off, Msg: fmt.Sprintf(msg, args...), Err: cause}
}

// Policy says what a pipeline does with a *FormatError.
type Policy uint8

const (
	// Fail ends the iteration with the error (the default, as in tf.data).
	Fail Policy = iota
	// Skip drops the bad record, counts it in the stage's Stats.Skipped and
	// goes on. A source that cannot find the next record after the damage
	// (a TFRecord length that fails its checksum, a truncated file) skips
	// the rest of that file.
	Skip
)

func (p Policy) String() string {
	if p == Skip {
		return "skip"
	}
	return "fail"
}

// isFormat reports whether err is (or wraps) a *FormatError.
func isFormat(err error) bool {
	var fe *FormatError
	return errors.As(err, &fe)
}
