package layout

import (
	"go/build/constraint"
	"testing"
)

// Device code is what binds a device's libraries: purego (which loads them
// at run time) and the CUDA package over it, and any file built only with
// (or only without) the tag cuda.
const (
	purego     = "github.com/ebitengine/purego"
	cudaImport = module + "backend/cuda"
	cudaTag    = "cuda"
)

// wiring lists the packages outside backend/ that may import backend/cuda to
// wire it into a command: the command, its CLI, and the hardware check
// (bench/gpucheck, run by scripts/gpu-check.sh).
var wiring = []string{"cmd", "internal/cli", "bench/gpucheck"}

// mentions reports whether the build constraint x mentions tag, either way
// (cuda or !cuda).
func mentions(x constraint.Expr, tag string) bool {
	switch x := x.(type) {
	case *constraint.TagExpr:
		return x.Tag == tag
	case *constraint.NotExpr:
		return mentions(x.X, tag)
	case *constraint.AndExpr:
		return mentions(x.X, tag) || mentions(x.Y, tag)
	case *constraint.OrExpr:
		return mentions(x.X, tag) || mentions(x.Y, tag)
	}
	return false
}

// deviceViolations returns what breaks the rule "device code only under
// backend/" in srcs, one line per file and cause.
func deviceViolations(srcs []source) []string {
	var bad []string
	for _, src := range srcs {
		if under(src.pkg, "backend") {
			continue
		}
		wires := false
		for _, w := range wiring {
			wires = wires || under(src.pkg, w)
		}
		for _, p := range src.imports {
			switch {
			case p == purego || under(p, purego):
				bad = append(bad, src.path+" imports "+p)
			case under(p, cudaImport) && !wires:
				bad = append(bad, src.path+" imports "+p)
			}
		}
		if src.constraint != nil && mentions(src.constraint, cudaTag) {
			bad = append(bad, src.path+" has the build constraint //go:build "+src.constraint.String())
		}
	}
	return bad
}

// TestDeviceCodeUnderBackend checks that device code lives only under
// backend/: no package outside it imports purego or backend/cuda (cmd/ and
// internal/cli may import backend/cuda to wire it), and no non-test file
// outside it is built only with or only without the tag cuda.
func TestDeviceCodeUnderBackend(t *testing.T) {
	srcs := sources(t)
	found := false
	for _, src := range srcs {
		if src.pkg == "backend/cuda" {
			for _, p := range src.imports {
				found = found || p == purego
			}
		}
	}
	if !found {
		t.Fatalf("no file of backend/cuda imports %s: the test would check nothing", purego)
	}
	for _, v := range deviceViolations(srcs) {
		t.Errorf("%s: device code belongs under backend/", v)
	}
}

// TestDeviceRuleCanFail feeds the rule sources that break it, so a rule
// that quietly passes everything is caught.
func TestDeviceRuleCanFail(t *testing.T) {
	tag := func(s string) constraint.Expr {
		x, err := constraint.Parse("//go:build " + s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, c := range []struct {
		name string
		src  source
		bad  bool
	}{
		{"purego in train", source{pkg: "train", path: "train/gpu.go", imports: []string{purego}}, true},
		{"backend/cuda in runtime", source{pkg: "runtime", path: "runtime/gpu.go", imports: []string{cudaImport}}, true},
		{"cuda tag in kernels", source{pkg: "kernels", path: "kernels/gpu.go", constraint: tag("cuda && linux")}, true},
		{"!cuda tag in mem", source{pkg: "mem", path: "mem/stub.go", constraint: tag("!cuda")}, true},
		{"purego in the CLI", source{pkg: "internal/cli", path: "internal/cli/gpu.go", imports: []string{purego}}, true},
		{"backend/cuda in the CLI", source{pkg: "internal/cli", path: "internal/cli/gpu.go", imports: []string{cudaImport}}, false},
		{"backend/cuda in cmd", source{pkg: "cmd/headroom", path: "cmd/headroom/main.go", imports: []string{cudaImport}}, false},
		{"backend/cuda in the hardware check", source{pkg: "bench/gpucheck", path: "bench/gpucheck/main.go", imports: []string{cudaImport}}, false},
		{"backend/cuda in another bench tool", source{pkg: "bench/pipeline", path: "bench/pipeline/main.go", imports: []string{cudaImport}}, true},
		{"purego under backend", source{pkg: "backend/cuda", path: "backend/cuda/load_cuda.go", imports: []string{purego}, constraint: tag("cuda")}, false},
		{"the purego tag in kernels", source{pkg: "kernels", path: "kernels/gemm_noasm.go", constraint: tag("!amd64 || purego")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := deviceViolations([]source{c.src})
			if (len(got) > 0) != c.bad {
				t.Errorf("got violations %q, want any: %v", got, c.bad)
			}
		})
	}
}
