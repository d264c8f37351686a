package atomicfile_test

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/headroom-ml/headroom/internal/atomicfile"
)

// A whole file from a func(io.Writer) error, as an export writes its model.
func ExampleWriteFile() {
	dir, _ := os.MkdirTemp("", "atomicfile")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.onnx")
	model := []byte("...")
	err := atomicfile.WriteFile(atomicfile.OS, path, 0o666, func(w io.Writer) error {
		_, err := w.Write(model)
		return err
	})
	b, _ := os.ReadFile(path)
	fmt.Println(err, string(b))
	// Output: <nil> ...
}

// A file streamed into as results arrive, as predict's CSV sink writes:
// committed at the end, or aborted on an error so the target keeps what it
// held.
func ExampleCreate() {
	dir, _ := os.MkdirTemp("", "atomicfile")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "predictions.csv")
	p, err := atomicfile.Create(atomicfile.OS, path, 0o666)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Abort() // does nothing once committed
	w := csv.NewWriter(p)
	w.Write([]string{"file", "out_0"})
	w.Write([]string{"a.png", "0.25"})
	w.Flush()
	if err := w.Error(); err != nil {
		fmt.Println(err)
		return // the deferred Abort removes the temporary file
	}
	if err := p.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(path)
	fmt.Print(string(b))
	// Output:
	// file,out_0
	// a.png,0.25
}

// A CPU profile: the Pending is the profile's io.Writer, committed when
// profiling stops.
func ExampleCreate_cpuProfile() {
	dir, _ := os.MkdirTemp("", "atomicfile")
	defer os.RemoveAll(dir)
	p, err := atomicfile.Create(atomicfile.OS, filepath.Join(dir, "cpu.pprof"), 0o666)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := pprof.StartCPUProfile(p); err != nil {
		p.Abort()
		fmt.Println(err)
		return
	}
	// ... the work being profiled ...
	pprof.StopCPUProfile()
	fmt.Println(p.Commit())
	// Output: <nil>
}
