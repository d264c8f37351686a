package main

import (
	"github.com/headroom-ml/headroom/datasets"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// workload is a model and its data.
type workload struct {
	model nn.Model
	data  func() *train.Data
	batch int
	seq   int // tokens per example (language models)
}

// workloadFor returns the reference model name's workload, the peers'
// (../shared/peers/train.py and seq.py, and scripts/gpu_check_torch.py):
// 28×28×1 images, features N(0,1) labelled by a random linear teacher (10
// classes), batch 128, for the image models; windows of 128 bytes of
// generated text, batch 32, for the gpt. small shrinks them for the
// emulated GPU: 8×8 images, batch 32; a gpt of 2 blocks of width 16 on
// windows of 8 bytes.
func workloadFor(name string, small bool) (workload, error) {
	side, n, batch, T := 28, 4096, 128, 128
	if small {
		side, n, batch, T = 8, 256, 32, 8
	}
	if name == "gpt" {
		var m nn.Model = nn.NewGPT(T, 256)
		if small {
			m = &nn.GPT{Vocab: 256, Context: T, Dim: 16, Heads: 2, Blocks: 2, Hidden: 32}
		}
		text := generatedText(1 << 20)
		return workload{model: m, batch: 32, seq: T, data: func() *train.Data {
			return train.OnText(&train.Text{Name: "text", Train: text[:len(text)*9/10], Val: text[len(text)*9/10:], T: T, ValWindows: 8})
		}}, nil
	}
	shape := tensor.Shape{side, side, 1}
	m, err := nn.NewModel(name, shape, 10)
	if err != nil {
		return workload{}, err
	}
	tr, te := datasets.Synthetic(shape, n, 512, 10, 7)
	return workload{model: m, batch: batch, data: func() *train.Data { return train.InMemory(tr, te) }}, nil
}

// generatedText is n bytes of Go-like text.
func generatedText(n int) []byte {
	words := []string{"func ", "main", "() {\n", "\treturn ", "x", " := ", "if ", "err != nil", " {\n", "}\n", "for ", "i", "++", "\n"}
	b := make([]byte, 0, n)
	for i := 0; len(b) < n; i++ {
		b = append(b, words[(i*7+i/3+i*i%5)%len(words)]...)
	}
	return b[:n]
}
