package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestSaidOnce: a run's closing message printed early (before an MPI
// run's final barrier) keeps its exit status and is not printed again.
func TestSaidOnce(t *testing.T) {
	var buf bytes.Buffer
	err := said(&stoppedError{signal: 15, msg: "stopped by SIGTERM after step 7"}, &buf)
	if got := buf.String(); got != "headroom: stopped by SIGTERM after step 7\n" {
		t.Fatalf("printed %q", got)
	}
	status, msg := exitStatus(err)
	if status != 143 || msg != "" {
		t.Fatalf("exitStatus = %d, %q; want 143 and nothing more to print", status, msg)
	}
	var st *stoppedError
	if !errors.As(err, &st) {
		t.Fatal("the stoppedError is not reachable through the said error")
	}
	buf.Reset()
	if err := said(nil, &buf); err != nil || buf.Len() != 0 {
		t.Fatalf("said(nil) = %v, printed %q", err, buf.String())
	}
	err = said(errors.New("plain failure"), &buf)
	if status, msg := exitStatus(err); status != exitError || msg != "" || !strings.Contains(buf.String(), "plain failure") {
		t.Fatalf("exitStatus = %d, %q; printed %q", status, msg, buf.String())
	}
}
