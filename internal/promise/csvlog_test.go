package promise

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCSVLogRefusesUserFiles: --csv names a file to append a headroom log
// to; pointed at an existing file that is not a headroom CSV log (here the
// user's data set), the run is refused before step 1 and the file is left
// byte for byte as it was. "Before step 1" is seen in the checkpoint
// directory: with --checkpoint-every 1, a run that took a step has written
// a checkpoint of it, even if it prints no epoch line.
func TestCSVLogRefusesUserFiles(t *testing.T) {
	imgs, text := imageFolder(t, 16, 40), textFile(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"mlp_digits", []string{"--model", "mlp", "--dataset", "digits"}},
		{"cnn_images", []string{"--model", "cnn", "--data", imgs}},
		{"gpt_text", []string{"--model", "gpt", "--text", text, "--seq", "32", "--batch", "8"}},
		{"lstm_go-src", []string{"--model", "lstm", "--dataset", "go-src", "--seq", "32", "--batch", "8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := csvFile(t, 50)
			orig, err := os.ReadFile(user)
			if err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour).Truncate(time.Second) // a rewrite now would show
			if err := os.Chtimes(user, old, old); err != nil {
				t.Fatal(err)
			}
			ckpt := t.TempDir()
			args := append([]string{"train", "--threads", "2", "--max-steps", "2", "--checkpoint-dir", ckpt, "--checkpoint-every", "1"}, tc.args...)
			r := headroom(t, append(args, "--csv", user)...)
			if r.status == 0 || r.status > 128 {
				t.Errorf("%s: got status %d, want a refusal (status 1)\n%s", r, r.status, r.output())
			}
			if startedTraining(r.stdout) {
				t.Errorf("%s: got epoch or RESULT lines, want a refusal before step 1\n%s", r, r.output())
			}
			if files := checkpoints(t, ckpt); len(files) > 0 {
				t.Errorf("%s: got checkpoints %v, want none: the run trained before refusing --csv", r, files)
			}
			if !strings.Contains(r.stderr, user) {
				t.Errorf("%s: got stderr %q, want it to name %s", r, strings.TrimSpace(r.stderr), user)
			}
			got, err := os.ReadFile(user)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, orig) {
				t.Errorf("%s: %s changed: got %d bytes, want the %d bytes it held", r, filepath.Base(user), len(got), len(orig))
			}
			if fi, err := os.Stat(user); err != nil || !fi.ModTime().Equal(old) {
				t.Errorf("%s: %s was rewritten (modification time %v, want %v)", r, filepath.Base(user), fi.ModTime(), old)
			}
		})
	}
}
