package cuda_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/backend/cuda"
	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/compile"
)

// ptxasPath returns NVIDIA's PTX assembler: $HEADROOM_PTXAS, else where
// scripts/test.sh unpacks Debian's nvidia-cuda-toolkit
// ($XDG_CACHE_HOME or ~/.cache, then headroom/nvidia-cuda-toolkit/usr/bin/ptxas).
// Without it the test fails when HEADROOM_REQUIRE_PTXAS=1 (the test
// command sets it) and is skipped otherwise.
func ptxasPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("HEADROOM_PTXAS")
	if p == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		p = filepath.Join(cache, "headroom", "nvidia-cuda-toolkit", "usr", "bin", "ptxas")
	}
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("ptxas not found at %s (scripts/test.sh unpacks it from Debian's nvidia-cuda-toolkit; or set HEADROOM_PTXAS)", p)
		if os.Getenv("HEADROOM_REQUIRE_PTXAS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// renderAll renders every instruction of progs for arch and returns the
// distinct kernels by name, with the instructions that use each.
func renderAll(t *testing.T, arch ptx.Arch, progs []*compile.Program, kernels map[string]*ptx.Kernel, users map[string]string) {
	t.Helper()
	for _, p := range progs {
		for i := range p.Instrs {
			it := &p.Instrs[i]
			inN := make([]int, len(it.In))
			for k, b := range it.In {
				inN[k] = p.Plan.Buffers[b].Shape.Size()
			}
			l, err := ptx.Render(arch, it, inN)
			if err != nil {
				t.Fatalf("%s: %v", p.Name, err)
			}
			for _, k := range l.Kernels() {
				if kernels[k.Name] == nil {
					kernels[k.Name] = k
					users[k.Name] = fmt.Sprintf("%s %s (%s)", it.Op, it.Owner, p.Name)
				}
			}
		}
	}
}

var (
	ptxasEntry     = regexp.MustCompile(`Compiling entry function '([^']+)'`)
	ptxasRegisters = regexp.MustCompile(`Used (\d+) registers`)
	ptxasSpills    = regexp.MustCompile(`(\d+) bytes spill stores, (\d+) bytes spill loads`)
)

// batch is how many kernels one ptxas run assembles: their entries after
// one copy of the header they share (.version, .target, .address_size),
// each entry's text as the driver would load it.
const batch = 48

// assemble runs ptxas for sm on the kernels and returns the registers of
// each; an error for any error, warning or spill, naming the kernel.
func assemble(ptxas, dir string, ks []*ptx.Kernel, sm int) (map[string]int, error) {
	var src bytes.Buffer
	for i, k := range ks {
		text := k.Text
		if i > 0 { // drop the shared header: keep the entry
			text = text[strings.Index(text, ".visible .entry"):]
		}
		src.WriteString(text + "\n")
	}
	path := filepath.Join(dir, fmt.Sprintf("%s.sm_%d.ptx", ks[0].Name, sm))
	if err := os.WriteFile(path, src.Bytes(), 0o644); err != nil {
		return nil, err
	}
	out, err := exec.Command(ptxas, fmt.Sprintf("-arch=sm_%d", sm), "-v", "-warn-spills", "-warn-lmem-usage", "-o", path+".cubin", path).CombinedOutput()
	os.Remove(path + ".cubin")
	text := string(out)
	if err != nil || strings.Contains(text, "warning") || strings.Contains(text, "error") {
		if len(ks) > 1 { // name the kernel: one at a time
			for _, k := range ks {
				if _, err := assemble(ptxas, dir, []*ptx.Kernel{k}, sm); err != nil {
					return nil, err
				}
			}
		}
		status := "warnings"
		if err != nil {
			status = err.Error()
		}
		return nil, fmt.Errorf("ptxas -arch=sm_%d on %s: %s\n%s", sm, ks[0].Name, status, text)
	}
	regs := map[string]int{}
	name := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if m := ptxasEntry.FindStringSubmatch(line); m != nil {
			name = m[1]
		}
		if m := ptxasSpills.FindStringSubmatch(line); m != nil && (m[1] != "0" || m[2] != "0") {
			return nil, fmt.Errorf("ptxas -arch=sm_%d: %s spills: %s", sm, name, m[0])
		}
		if m := ptxasRegisters.FindStringSubmatch(line); m != nil && name != "" {
			regs[name], _ = strconv.Atoi(m[1])
		}
	}
	for _, k := range ks {
		if _, ok := regs[k.Name]; !ok {
			return nil, fmt.Errorf("ptxas -arch=sm_%d: no register count for %s in\n%s", sm, k.Name, text)
		}
	}
	return regs, nil
}

// Every kernel the renderer writes for the reference models (training,
// last-batch and evaluation steps, float32 and both 16-bit policies)
// assembles with NVIDIA's ptxas for sm_80 (A100) and sm_90 (H100): no
// error, no warning, no spill. The registers of each kernel are written
// to $HEADROOM_PTX_REPORT when it is set (scripts/test.sh prints it) and
// to the test log.
func TestKernelsAssemble(t *testing.T) {
	ptxas := ptxasPath(t)
	dir := t.TempDir()
	planner, err := cuda.Planning(12080, 9, 0, 80<<30)
	if err != nil {
		t.Fatal(err)
	}
	var progs [][]*compile.Program
	for _, model := range referenceModels {
		for _, prec := range policies {
			progs = append(progs, referencePrograms(t, planner, model, prec))
		}
	}
	var report bytes.Buffer
	for _, sm := range []int{80, 90} {
		arch, err := ptx.ArchFor(12080, sm/10, sm%10)
		if err != nil {
			t.Fatal(err)
		}
		kernels, users := map[string]*ptx.Kernel{}, map[string]string{}
		for _, p := range progs {
			renderAll(t, arch, p, kernels, users)
		}
		names := make([]string, 0, len(kernels))
		for n := range kernels {
			names = append(names, n)
		}
		sort.Strings(names)
		var mu sync.Mutex
		regs := map[string]int{}
		var wg sync.WaitGroup
		next := make(chan []*ptx.Kernel)
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ks := range next {
					r, err := assemble(ptxas, dir, ks, sm)
					mu.Lock()
					if err != nil {
						t.Error(err)
					}
					for n, v := range r {
						regs[n] = v
					}
					mu.Unlock()
				}
			}()
		}
		for i := 0; i < len(names); i += batch {
			var ks []*ptx.Kernel
			for _, n := range names[i:min(i+batch, len(names))] {
				ks = append(ks, kernels[n])
			}
			next <- ks
		}
		close(next)
		wg.Wait()
		fmt.Fprintf(&report, "%s: %d kernels, registers per kernel (first used by)\n", arch, len(names))
		for _, n := range names {
			fmt.Fprintf(&report, "  %-40s %3d  %s\n", n, regs[n], users[n])
		}
		if len(names) < 20 {
			t.Errorf("%s: only %d kernels for the six reference models", arch, len(names))
		}
	}
	t.Log("\n" + report.String())
	if path := os.Getenv("HEADROOM_PTX_REPORT"); path != "" {
		if err := os.WriteFile(path, report.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The assembly check fails for a kernel ptxas rejects and for one that
// spills: a kernel with a bad operand, and one that keeps 64 values live
// under .maxnreg 16.
func TestAssemblyCheckCatches(t *testing.T) {
	ptxas := ptxasPath(t)
	const header = ".version 7.0\n.target sm_80\n.address_size 64\n\n"
	bad := &ptx.Kernel{Name: "bad", Text: header + ".visible .entry bad(.param .u64 P)\n{\n\t.reg .f32 %f<3>;\n\tadd.rn.f32 %f1, %f2;\n\tret;\n}\n"}
	var s strings.Builder
	s.WriteString(header + ".visible .entry spill(.param .u64 P)\n.maxnreg 16\n{\n\t.reg .f32 %f<130>;\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [P];\n")
	for i := 1; i <= 64; i++ {
		fmt.Fprintf(&s, "\tld.volatile.global.f32 %%f%d, [%%rd1+%d];\n", i, 4*i)
	}
	acc := 65
	fmt.Fprintf(&s, "\tmul.rn.f32 %%f%d, %%f1, %%f64;\n", acc)
	for i := 2; i <= 32; i++ {
		fmt.Fprintf(&s, "\tfma.rn.f32 %%f%d, %%f%d, %%f%d, %%f%d;\n", acc+1, i, 65-i, acc)
		acc++
	}
	fmt.Fprintf(&s, "\tst.global.f32 [%%rd1], %%f%d;\n\tret;\n}\n", acc)
	spill := &ptx.Kernel{Name: "spill", Text: s.String()}
	for _, k := range []*ptx.Kernel{bad, spill} {
		_, err := assemble(ptxas, t.TempDir(), []*ptx.Kernel{k}, 80)
		if err == nil || !strings.Contains(err.Error(), k.Name) {
			t.Errorf("%s: error %v, want one naming the kernel", k.Name, err)
		} else {
			t.Logf("%s: %v", k.Name, strings.SplitN(err.Error(), "\n", 2)[0])
		}
	}
}
