package promise

import "testing"

// TestEveryRunReportsItsSpeed: samples_per_sec is positive on every path:
// runs shorter than the 20 warm-up steps (timed from step 1 then), runs on
// the user's files (--data) and on text, and, as the control, a run on a
// built-in data set past the warm-up.
func TestEveryRunReportsItsSpeed(t *testing.T) {
	csv, imgs, text := csvFile(t, 300), imageFolder(t, 16, 40), textFile(t)
	x, y := npyFiles(t, 240)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"builtin_past_warmup", []string{"--model", "mlp", "--dataset", "digits", "--batch", "16", "--max-steps", "40"}},
		{"builtin_under_warmup", []string{"--model", "mlp", "--dataset", "digits", "--batch", "16", "--max-steps", "5"}},
		// 240 training rows at batch 16: 15 steps an epoch, 45 in all
		{"csv_past_warmup", []string{"--model", "mlp", "--data", csv, "--validation-split", "0.2", "--batch", "16", "--epochs", "3"}},
		// 240 examples at batch 8: 30 steps
		{"npy_streamed_past_warmup", []string{"--model", "cnn", "--data", x, "--labels", y, "--stream", "--batch", "8", "--epochs", "1"}},
		{"images_under_warmup", []string{"--model", "cnn", "--data", imgs, "--batch", "16", "--max-steps", "5"}},
		{"text_under_warmup", []string{"--model", "gpt", "--text", text, "--seq", "32", "--batch", "8", "--max-steps", "5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := headroom(t, append([]string{"train", "--threads", "2"}, tc.args...)...)
			r.ok(t)
			checkSpeed(t, r, r.result(t))
		})
	}
}
