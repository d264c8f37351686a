package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

const usage = `headroom trains neural networks with memory you can trust.

Usage:
  headroom train    [flags]  train a model (default: a small MLP on the embedded digits;
                             --data for your own CSV, NPY/NPZ, image folder, TFRecord or IDX data)
  headroom plan     [flags]  print the memory plan of a training step without training
  headroom evaluate [flags]  loss and accuracy of a saved model (--load) on labelled data (--data)
  headroom predict  [flags]  a saved model's outputs on data (--data) to a .npy or .csv file (--out)
  headroom export   [flags]  write a saved model as ONNX (--format onnx), float or int8 (--int8)
  headroom generate --load FILE [flags]  sample text from a language model saved by train --save
  headroom version           print the version

Run 'headroom COMMAND -h' for the flags of a command.

Exit status, the same for every command and model: 0 done; 1 an error (bad
data, a plan that does not fit, a file that cannot be read or written); 2
a usage error (an unknown command or flag, a flag's bad value); 75 a run
that stopped because its container's memory (followed while training) fell
below the smallest way to run the step, after writing a checkpoint: resume
when there is room (EX_TEMPFAIL: try again later); 128+N stopped by signal
N after writing a checkpoint (143 for SIGTERM, 130 for SIGINT).
`

// Exit statuses (see usage).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// exitNoRoom (sysexits' EX_TEMPFAIL) ends a run whose container's
	// memory fell below its smallest plan: it stopped, with a checkpoint,
	// before the kernel's OOM killer would act.
	exitNoRoom = 75
)

// commands maps a command's name to what runs it.
var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"train":    runTrain,
	"plan":     runPlan,
	"generate": runGenerate,
	"predict":  runPredict,
	"evaluate": runEvaluate,
	"export":   runExport,
	"version": func(args []string, stdout, _ io.Writer) error {
		return runVersion(args, stdout)
	},
}

// Main runs the command with args (without the program name) and returns
// the exit status.
func Main(args []string, stdout, stderr io.Writer) (status int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "headroom: internal error: %v (please report it)\n", r)
			status = exitError
		}
	}()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "--version":
		name = "version"
	}
	run, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "headroom: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	status, msg := exitStatus(run(args[1:], stdout, stderr))
	if msg != "" {
		fmt.Fprintf(stderr, "headroom: %s\n", msg)
	}
	return status
}

// exitStatus maps a command's error to the exit status and the message
// printed for it (see usage): -h is no error, a usage error is 2, a run
// stopped by a signal 128+N, anything else 1.
func exitStatus(err error) (int, string) {
	var u *usageError
	var st *stoppedError
	var ex *exhaustedError
	var sd *saidError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK, ""
	case errors.As(err, &sd):
		status, _ := exitStatus(sd.err)
		return status, ""
	case errors.As(err, &st):
		return 128 + st.signal, st.msg
	case errors.As(err, &ex):
		return exitNoRoom, ex.msg
	case errors.As(err, &u):
		return exitUsage, strings.TrimSpace(u.Error())
	}
	return exitError, strings.TrimSpace(err.Error())
}

// usageError is a command line that cannot be run: an unknown flag, a
// flag's bad value, flags that do not go together.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// saidError is an error whose message has already been printed; its
// exit status is its error's.
type saidError struct{ err error }

func (e *saidError) Error() string { return e.err.Error() }
func (e *saidError) Unwrap() error { return e.err }

// said prints err's message to stderr now (as Main would) and returns it
// as a saidError, so that Main prints it no second time.
func said(err error, stderr io.Writer) error {
	status, msg := exitStatus(err)
	if status == exitOK || msg == "" {
		return err
	}
	fmt.Fprintf(stderr, "headroom: %s\n", msg)
	return &saidError{err}
}

// stoppedError ends a run stopped by a signal after its checkpoint.
type stoppedError struct {
	signal int
	msg    string
}

func (e *stoppedError) Error() string { return e.msg }

// exhaustedError ends a run whose live budget fell below its smallest
// plan, after its checkpoint.
type exhaustedError struct{ msg string }

func (e *exhaustedError) Error() string { return e.msg }

// isTerminal reports whether w is a terminal (progress bars only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
