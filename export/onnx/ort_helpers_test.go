package onnx

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// The real-runtime tests run exported models in onnxruntime-node, installed
// once with npm into the user's cache directory (outside the repository).
const ortVersion = "1.30.0"

var (
	ortOnce sync.Once
	ortDir  string // the directory holding node_modules/onnxruntime-node
	ortWhy  string // why it is not available
)

// ortSetup returns the directory to put on NODE_PATH, or skips the test
// (fails it when HEADROOM_REQUIRE_NODE=1) when node, npm or the package
// cannot be had.
func ortSetup(t *testing.T) string {
	t.Helper()
	ortOnce.Do(func() { ortDir, ortWhy = installORT() })
	if ortWhy != "" {
		if os.Getenv("HEADROOM_REQUIRE_NODE") == "1" {
			t.Fatalf("onnxruntime-node is required (HEADROOM_REQUIRE_NODE=1): %s", ortWhy)
		}
		t.Skipf("skipping the onnxruntime comparison: %s", ortWhy)
	}
	return filepath.Join(ortDir, "node_modules")
}

func installORT() (dir, why string) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", "node is not on PATH"
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Sprintf("no cache directory: %v", err)
	}
	dir = filepath.Join(cache, "headroom", "onnxruntime-node-"+ortVersion)
	marker := filepath.Join(dir, "node_modules", "onnxruntime-node", "package.json")
	if _, err := os.Stat(marker); err == nil {
		return dir, ""
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", "npm is not on PATH (needed once, to install onnxruntime-node)"
	}
	// install next to the final place, then rename: a half-done install is
	// never mistaken for a good one
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err.Error()
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "onnxruntime-node-install-")
	if err != nil {
		return "", err.Error()
	}
	defer os.RemoveAll(tmp)
	// --ignore-scripts: the package's CPU library ships in it; its install
	// script only downloads GPU builds
	cmd := exec.Command("npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", tmp, "onnxruntime-node@"+ortVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Sprintf("npm install onnxruntime-node@%s failed: %v\n%s", ortVersion, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(marker); serr != nil { // not installed by someone else meanwhile
			return "", err.Error()
		}
	}
	return dir, ""
}

// ortResult is what run.js reports.
type ortResult struct {
	Inputs    []string `json:"inputs"`
	Outputs   []string `json:"outputs"`
	MsPerRun  float64  `json:"ms_per_run"`
	Tensors   []tensor.Tensor
	ModelSize int
}

// runORT runs model in onnxruntime on feeds (by input name); repeat > 0
// also times that many more runs.
func runORT(t *testing.T, model []byte, feeds map[string]tensor.Tensor, repeat int) ortResult {
	t.Helper()
	nodePath := ortSetup(t)
	dir := t.TempDir()
	mpath := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(mpath, model, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join("testdata", "run.js"), mpath, dir}
	for name, v := range feeds {
		p := filepath.Join(dir, "in-"+strconv.Itoa(len(args))+".npy")
		if err := os.WriteFile(p, encodeNPY(v), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, name+"="+p)
	}
	cmd := exec.Command("node", args...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath, "ORT_REPEAT="+strconv.Itoa(repeat))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("onnxruntime: %v\n%s", err, stderr.String())
	}
	var r ortResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("run.js printed %q: %v", out, err)
	}
	for i := range r.Outputs {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)+".npy"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := decodeNPY(b)
		if err != nil {
			t.Fatalf("output %d: %v", i, err)
		}
		r.Tensors = append(r.Tensors, v)
	}
	r.ModelSize = len(model)
	return r
}

var npyDescr = map[tensor.DType]string{tensor.Float32: "<f4", tensor.Float64: "<f8", tensor.Int32: "<i4",
	tensor.Int64: "<i8", tensor.Uint8: "|u1", tensor.Bool: "|b1"}

// encodeNPY writes t as a version 1.0 .npy file (little-endian host).
func encodeNPY(t tensor.Tensor) []byte {
	var shape strings.Builder
	for i, d := range t.Shape() {
		if i > 0 {
			shape.WriteString(", ")
		}
		shape.WriteString(strconv.Itoa(d))
	}
	if t.Shape().Rank() == 1 {
		shape.WriteString(",")
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", npyDescr[t.DType()], shape.String())
	h += strings.Repeat(" ", (64-(10+len(h)+1)%64)%64) + "\n"
	out := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	out = append(out, h...)
	return append(out, t.Bytes()...)
}

var npyHeader = regexp.MustCompile(`'descr':\s*'([^']+)',\s*'fortran_order':\s*False,\s*'shape':\s*\(([^)]*)\)`)

// decodeNPY reads a version 1.0 .npy file as run.js writes it.
func decodeNPY(b []byte) (tensor.Tensor, error) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" || b[6] != 1 {
		return tensor.Tensor{}, fmt.Errorf("not a version 1 .npy file")
	}
	hlen := int(binary.LittleEndian.Uint16(b[8:]))
	if 10+hlen > len(b) {
		return tensor.Tensor{}, fmt.Errorf("header runs past the end")
	}
	m := npyHeader.FindStringSubmatch(string(b[10 : 10+hlen]))
	if m == nil {
		return tensor.Tensor{}, fmt.Errorf("unsupported header %q", b[10:10+hlen])
	}
	dtype := tensor.Invalid
	for d, s := range npyDescr {
		if s == m[1] {
			dtype = d
		}
	}
	if dtype == tensor.Invalid {
		return tensor.Tensor{}, fmt.Errorf("unsupported dtype %q", m[1])
	}
	shape := tensor.Shape{}
	for _, s := range strings.Split(m[2], ",") {
		if s = strings.TrimSpace(s); s != "" {
			d, err := strconv.Atoi(s)
			if err != nil {
				return tensor.Tensor{}, err
			}
			shape = append(shape, d)
		}
	}
	data := b[10+hlen:]
	if len(data) != shape.Size()*dtype.Size() {
		return tensor.Tensor{}, fmt.Errorf("%d data bytes for %s%v", len(data), dtype, shape)
	}
	t := tensor.New(dtype, shape)
	copy(t.Bytes(), data)
	return t, nil
}
