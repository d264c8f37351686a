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
  headroom train [flags]   train a model (default: a small MLP on the embedded digits)
  headroom plan  [flags]   print the memory plan of a training step without training

Run 'headroom train -h' or 'headroom plan -h' for the flags.
`

// Main runs the command with args (without the program name) and returns
// the exit status.
func Main(args []string, stdout, stderr io.Writer) (status int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "headroom: internal error: %v (please report it)\n", r)
			status = 2
		}
	}()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "train":
		err = runTrain(args[1:], stdout, stderr)
	case "plan":
		err = runPlan(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "headroom: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ex *exitError
	if errors.As(err, &ex) {
		fmt.Fprintf(stderr, "headroom: %s\n", ex.msg)
		return ex.status
	}
	if err != nil {
		msg := strings.TrimSpace(err.Error())
		fmt.Fprintf(stderr, "headroom: %s\n", msg)
		return 1
	}
	return 0
}

// isTerminal reports whether w is a terminal (progress bars only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
