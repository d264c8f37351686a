package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/headroom-ml/headroom/export/onnx"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// exportBatch is the batch the exported graph is built at: any size
// above 1 (the batch axis is symbolic in the file), and the calibration
// batch.
const exportBatch = 128

// exportFlags are export's flags.
type exportFlags struct {
	load, format, out, calib, calibLabels string
	kerasConfig                           string
	opset, calibBatches, threads          int
	int8                                  bool
}

func (f *exportFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.load, "load", "", "the model file: written by headroom train --save, or a Keras .keras or .h5 file")
	fs.StringVar(&f.kerasConfig, "keras-config", "", "with --load WEIGHTS.h5: the Keras model's architecture (model.to_json(), or a .keras archive's config.json)")
	fs.StringVar(&f.format, "format", "onnx", "the export format: onnx")
	fs.StringVar(&f.out, "out", "", "the file to write, e.g. model.onnx")
	fs.IntVar(&f.opset, "opset", onnx.DefaultOpset, fmt.Sprintf("the ONNX opset, %d to %d", onnx.MinOpset, onnx.MaxOpset))
	fs.BoolVar(&f.int8, "int8", false, "quantize after training: weights int8 per output channel, activations uint8 with ranges calibrated on --calibration-data (QDQ, which onnxruntime's CPU provider runs as integer kernels)")
	fs.StringVar(&f.calib, "calibration-data", "", "with --int8: data to calibrate the activations' ranges on, read as the model's training data (default: a sample of the training data, if it is still where it was); for a language model, text (cut into windows) or an .npy of int32 token windows")
	fs.StringVar(&f.calibLabels, "calibration-labels", "", "with --int8: ignored labels file of npy or idx calibration data")
	fs.IntVar(&f.calibBatches, "calibration-batches", 8, fmt.Sprintf("with --int8: batches of %d examples to calibrate on", exportBatch))
	fs.IntVar(&f.threads, "threads", defaultThreads(), "threads for calibration")
}

// check refuses flags that do not go together.
func (f *exportFlags) check() error {
	switch {
	case f.load == "" || f.out == "":
		return usagef("--load (a model file) and --out are required")
	case f.format != "onnx":
		return usagef("--format %q: headroom exports onnx", f.format)
	case f.opset < onnx.MinOpset || f.opset > onnx.MaxOpset:
		return usagef("--opset %d: want %d to %d", f.opset, onnx.MinOpset, onnx.MaxOpset)
	case f.calibBatches <= 0 || f.threads <= 0:
		return usagef("--calibration-batches and --threads must be positive")
	case !f.int8 && f.calib != "":
		return usagef("--calibration-data is for --int8")
	case same(f.out, f.load):
		return usagef("--out %s would overwrite the model file", f.out)
	}
	return nil
}

func runExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", stdout)
	var f exportFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return &usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := f.check(); err != nil {
		return err
	}
	setThreads(f.threads)
	mf, err := loadModelFile(f.load, f.kerasConfig)
	if err != nil {
		return err
	}
	m, err := exportModel(mf)
	if err != nil {
		return err
	}
	var f32 bytes.Buffer
	if err := onnx.Write(&f32, m, onnx.Options{Opset: f.opset, ProducerVersion: version}); err != nil {
		return err
	}
	file := f32.Bytes()
	if f.int8 {
		if file, err = f.quantized(stdout, mf, m, f32.Len()); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(f.out, file); err != nil {
		return err
	}
	x := m.Inputs[0]
	fmt.Fprintf(stdout, "headroom: wrote %s (%s, ONNX opset %d): input %q %s%s, output %q %s%s\n", f.out, mem.FormatBytes(int64(len(file))),
		f.opset, x.Attr().Name, x.DType(), batchShape(x.Shape()), m.Outputs[0].Name, m.Outputs[0].Node.DType(), batchShape(m.Outputs[0].Node.Shape()))
	return nil
}

// quantized returns m as an int8 file, its activations' ranges calibrated
// on --calibration-data (or a sample of the training data).
func (f *exportFlags) quantized(stdout io.Writer, mf *train.ModelFile, m onnx.Model, floatBytes int) ([]byte, error) {
	samples, what, err := calibrationSamples(mf, f.calib, f.calibLabels, f.calibBatches*exportBatch)
	if err != nil {
		return nil, err
	}
	x := m.Inputs[0]
	for i, s := range samples {
		if per := x.Shape()[1:].Size(); len(s) != per {
			return nil, fmt.Errorf("calibration example %d of %s has %d values; the model's input %q takes %v", i, what, len(s), x.Attr().Name, x.Shape()[1:])
		}
	}
	ranges, err := onnx.Calibrate(m, (len(samples)+exportBatch-1)/exportBatch, func(i int, in map[string]tensor.Tensor) error {
		x := in[m.Inputs[0].Attr().Name]
		per := x.Len() / exportBatch
		for r := 0; r < exportBatch; r++ {
			src := samples[(i*exportBatch+r)%len(samples)] // the last batch repeats the first examples
			for k := 0; k < per; k++ {
				x.SetFloat64At(r*per+k, float64(src[k]))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var i8 bytes.Buffer
	if err := onnx.Write(&i8, m, onnx.Options{Opset: f.opset, ProducerVersion: version, Int8: &onnx.Int8Options{Ranges: ranges}}); err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "headroom: int8 calibrated on %d examples of %s: %s, %.2fx the float model's %s\n",
		len(samples), what, mem.FormatBytes(int64(i8.Len())), float64(i8.Len())/float64(floatBytes), mem.FormatBytes(int64(floatBytes)))
	return i8.Bytes(), nil
}

// exportModel builds the model's inference graph, as predict runs it, for
// export.
func exportModel(mf *train.ModelFile) (onnx.Model, error) {
	var b *step.Builder
	err := graph.Catch(func() { b = step.NewBuilder(step.Config{Model: mf.Model}, exportBatch, step.Infer) })
	if err != nil {
		return onnx.Model{}, err
	}
	if len(b.Inputs) != 1 {
		return onnx.Model{}, fmt.Errorf("the model has %d inputs; export takes one", len(b.Inputs))
	}
	meta := map[string]string{}
	if names := mf.Preprocessing.ClassNames; names != nil {
		j, _ := json.Marshal(names)
		meta["classes"] = string(j)
	}
	if p, err := json.Marshal(mf.Preprocessing); err == nil {
		meta["headroom.preprocessing"] = string(p)
	}
	m := onnx.Model{Graph: b.G, Inputs: b.Inputs, Weights: mf.Weight, Metadata: meta,
		Doc: fmt.Sprintf("exported by headroom from %s; inputs as headroom feeds them (integer data times %g)", filepath.Base(mf.Path), mf.Preprocessing.ScaleOrDefault())}
	for i, o := range b.Outputs {
		name := "output"
		if i > 0 {
			name = fmt.Sprintf("output_%d", i)
		}
		m.Outputs = append(m.Outputs, onnx.Output{Name: name, Node: o})
	}
	return m, nil
}

// writeFileAtomic writes b to path atomically (atomicfile: a hidden
// temporary file, fsync, rename, fsync of the directory).
func writeFileAtomic(path string, b []byte) error {
	err := atomicfile.WriteFile(atomicfile.OS, path, 0o666, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// batchShape prints a shape with the symbolic batch: [N, 28, 28, 1].
func batchShape(s tensor.Shape) string {
	out := "[N"
	for _, d := range s[1:] {
		out += fmt.Sprintf(", %d", d)
	}
	return out + "]"
}
