package compile

// Cost estimates the work of one run of the program: floating-point
// operations (2 per multiply-add in products and convolutions, one per
// element and step elsewhere: each op's lowering.flops) and bytes read
// and written. Fit-to-budget ranks plans with it before timing the best
// few.
func (p *Program) Cost() (flops, bytes float64) {
	size := func(b int) float64 { return float64(p.Plan.Buffers[b].Shape.Size()) }
	for i := range p.Instrs {
		in := &p.Instrs[i]
		out := size(in.Out)
		bytes += float64(p.Plan.Buffers[in.Out].Bytes)
		for _, b := range in.In {
			bytes += float64(p.Plan.Buffers[b].Bytes)
		}
		if f := lowerings[in.Op].flops; f != nil {
			flops += f(in, out)
		} else {
			flops += out
		}
	}
	return flops, bytes
}
