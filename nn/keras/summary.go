package keras

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/tensor"
)

// Summary returns the model's layers as Keras' model.summary() prints
// them: one row per layer with its output shape (batch as None; "multiple"
// for a layer called more than once) and parameters, the tensors a
// functional model's layer is connected to, and the totals.
func (m *Model) Summary() string {
	var b strings.Builder
	functional := m.Functional != nil
	width := 65
	if functional {
		width = 98
	}
	rule := strings.Repeat("_", width) + "\n"
	fmt.Fprintf(&b, "Model: %q\n", m.Name)
	b.WriteString(rule)
	if functional {
		fmt.Fprintf(&b, "%-34s %-22s %-10s %s\n", "Layer (type)", "Output Shape", "Param #", "Connected to")
	} else {
		fmt.Fprintf(&b, "%-34s %-20s %s\n", "Layer (type)", "Output Shape", "Param #")
	}
	b.WriteString(strings.Repeat("=", width) + "\n")
	for i, l := range m.Layers {
		name := l.Name + " (" + l.Class + ")"
		if functional {
			conn := ""
			if len(l.Inbound) > 0 {
				conn = l.Inbound[0]
			}
			fmt.Fprintf(&b, "%-34s %-22s %-10s %s\n", name, OutputShapeString(l), commas(l.Params), conn)
			for _, more := range l.Inbound[min(1, len(l.Inbound)):] {
				fmt.Fprintf(&b, "%-34s %-22s %-10s %s\n", "", "", "", more)
			}
		} else {
			fmt.Fprintf(&b, "%-34s %-20s %s\n", name, OutputShapeString(l), commas(l.Params))
		}
		if i < len(m.Layers)-1 {
			b.WriteString(rule)
		}
	}
	b.WriteString(strings.Repeat("=", width) + "\n")
	fmt.Fprintf(&b, "Total params: %s\n", commas(m.Params))
	fmt.Fprintf(&b, "Trainable params: %s\n", commas(m.TrainableParams))
	fmt.Fprintf(&b, "Non-trainable params: %s\n", commas(m.NonTrainableParams()))
	b.WriteString(rule)
	return b.String()
}

// OutputShapeString writes a layer's output shape as Keras' summary does:
// "(None, 28, 28, 1)", a list of them for several outputs, "multiple" for
// a layer called more than once.
func OutputShapeString(l LayerInfo) string {
	if l.Calls > 1 {
		return "multiple"
	}
	if len(l.Outputs) > 1 {
		parts := make([]string, len(l.Outputs))
		for i, o := range l.Outputs {
			parts[i] = ShapeString(o)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return ShapeString(l.Output)
}

// ShapeString writes a per-example shape with the batch as None:
// (None, 312).
func ShapeString(s tensor.Shape) string {
	parts := []string{"None"}
	for _, d := range s {
		parts = append(parts, strconv.Itoa(d))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// commas writes n with thousands separators, as Keras' summary.
func commas(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
