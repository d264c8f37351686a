package onnx

import (
	"github.com/headroom-ml/headroom/graph"
)

// The sequence ops (graph/sequence.go) are not exported yet: the gpt's
// attention, layer normalization and gelu are single ops in headroom and
// compositions (or contrib ops) in ONNX opset 17.
func init() {
	registerNotExportable("not exported yet: attention as one op (opset 17 has none)", graph.OpAttention)
	registerNotExportable("a further output of attention or layer normalization, not exported yet", graph.OpPart)
	registerNotExportable("not exported yet: layer normalization as one op", graph.OpLayerNorm)
	registerNotExportable("not exported yet: gelu as one op", graph.OpGelu)
	registerNotExportable("a decoding step's cache write: not exported", graph.OpCacheWrite)
	registerNotExportable(trainingOnly, graph.OpAttentionGrad, graph.OpUnsliceAdd, graph.OpGeluGrad, graph.OpLayerNormGrad)
}
