package onnx

import (
	"github.com/headroom-ml/headroom/graph"
)

// The augmentation ops (graph/augment.go): Keras' random preprocessing
// layers draw and transform only in training; in inference they are the
// identity, so an inference graph holds none of these.
func init() {
	registerNotExportable("a training step's random draws: Keras' random preprocessing layers are the identity at inference",
		graph.OpRandomUniform, graph.OpImageTransform)
	registerNotExportable(trainingOnly, graph.OpImageTransformGrad)
}
