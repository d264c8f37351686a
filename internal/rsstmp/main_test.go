package rsstmp

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

func rss(tag string) {
	b, _ := os.ReadFile("/proc/self/status")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "VmHWM") || strings.HasPrefix(l, "RssAnon") || strings.HasPrefix(l, "RssFile") {
			fmt.Print(tag, " ", l, "  ")
		}
	}
	fmt.Printf(" heapSys=%.1fMiB heapInuse=%.1fMiB heapReleased=%.1fMiB sys=%.1fMiB\n", float64(ms.HeapSys)/1048576, float64(ms.HeapInuse)/1048576, float64(ms.HeapReleased)/1048576, float64(ms.Sys)/1048576)
}

func TestRSS(t *testing.T) {
	model := os.Getenv("M")
	runtime.GOMAXPROCS(2)
	kernels.SetThreads(2)
	rss("start")
	n, shape := 60000, tensor.Shape{784}
	if model == "cnn" {
		n, shape = 20000, tensor.Shape{28, 28, 1}
	}
	tr, te := datasets.Synthetic(shape, n, n/10, 10, 0)
	rss("data")
	m, _ := nn.ModelByName(model, tr.Shape, 10)
	cfg := train.Config{Model: m, Epochs: 1, Batch: 128, Validation: te, Threads: 2, MaxSteps: 30}
	tt, err := train.New(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	rss("new")
	fmt.Println("planned MiB", float64(tt.Planned)/1048576)
	if _, err := tt.Fit(tr); err != nil {
		t.Fatal(err)
	}
	rss("fit")
}
