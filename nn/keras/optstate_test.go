package keras

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// The Adam state a Keras 3 archive keeps (made with h5py in saving_lib's
// layout) loads exactly, each value into its variable's slot, with the
// iteration count.
func TestOptimizerStateH5py(t *testing.T) {
	dir, manifest := makeKerasFiles(t)
	var want struct {
		Iterations int64                `json:"iterations"`
		Slots      map[string][]float64 `json:"slots"`
	}
	if err := json.Unmarshal(manifest["optimizer"], &want); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"k3.keras", "k3_chunked.keras"} {
		m, err := Load(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		st, why, err := ReadOptimizerState(m)
		if err != nil || st == nil {
			t.Fatalf("%s: state %v, why %q, error %v", file, st, why, err)
		}
		if st.Iterations != want.Iterations || st.Class != "Adam" || len(st.Slots) != len(want.Slots) {
			t.Errorf("%s: %s after %d steps, %d slots; want Adam after %d, %d", file, st.Class, st.Iterations, len(st.Slots), want.Iterations, len(want.Slots))
		}
		for name, w := range want.Slots {
			got, ok := st.Slots[name]
			if !ok {
				t.Errorf("%s: no slot %s", file, name)
				continue
			}
			for i, v := range got.Float32s() {
				if float64(v) != float64(float32(w[i])) {
					t.Errorf("%s: %s[%d] = %v, want %v", file, name, i, v, w[i])
					break
				}
			}
		}
	}
	// the legacy .h5 layout's state is named, not read
	m, err := Load(filepath.Join(dir, "k2_full.h5"))
	if err != nil {
		t.Fatal(err)
	}
	if st, why, err := ReadOptimizerState(m); st != nil || err != nil {
		t.Errorf("k2_full.h5: state %v, why %q, error %v", st, why, err)
	}
}

// The optimizer state of the Keras 3 archives others wrote maps onto
// their trainable variables: the counts Keras keeps, velocities never
// negative, momentums of both signs; what headroom does not read is named.
func TestOptimizerStateShared(t *testing.T) {
	dir := filepath.Join(filepath.Dir(sharedDir(t)), "keras-files")
	for _, c := range []struct {
		file, class string
		iterations  int64
		slots       int
		why         string
	}{
		{"k3151_mnist_cnn.keras", "Adam", 2532, 16, ""},
		{"k3132_diabetes_mlp.keras", "RMSprop", 860, 6, ""},
		{"k214_hitsong_mlp.keras", "Adam", 90000, 12, ""}, // tf.keras 2.14: no learning-rate variable
		{"k310_potato_cnn_preproc.keras", "Adam", 1080, 28, ""},
		{"k392_lstm_forecast_nonetime.keras", "Adam", 720, 10, ""},
		{"k310_stock_transformer_fp16.keras", "", 0, 0, "MultiHeadAttention"},
		{"k37_churn_mlp.h5", "", 0, 0, "legacy .h5"},
	} {
		m, err := Load(filepath.Join(dir, c.file), WithSeq(100))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		st, why, err := ReadOptimizerState(m)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if c.why != "" {
			if st != nil || !strings.Contains(why, c.why) {
				t.Errorf("%s: state %v, why %q; want none, naming %q", c.file, st, why, c.why)
			}
			continue
		}
		if st == nil {
			t.Fatalf("%s: no state (%s)", c.file, why)
		}
		if st.Class != c.class || st.Iterations != c.iterations || len(st.Slots) != c.slots {
			t.Errorf("%s: %s after %d steps, %d slots; want %s after %d, %d", c.file, st.Class, st.Iterations, len(st.Slots), c.class, c.iterations, c.slots)
		}
		negM := false
		for name, v := range st.Slots {
			for _, x := range v.Float32s() {
				if (strings.HasSuffix(name, "/v") || strings.HasSuffix(name, "/rms")) && x < 0 {
					t.Errorf("%s: %s holds %v: a velocity is never negative", c.file, name, x)
					break
				}
				negM = negM || (strings.HasSuffix(name, "/m") && x < 0)
			}
		}
		if c.class == "Adam" && !negM {
			t.Errorf("%s: no momentum is negative: m and v mixed up?", c.file)
		}
	}
}
