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
		flops += p.instrFlops(in, out)
	}
	return flops, bytes
}

// InstrFlops estimates the floating-point operations of instruction i, as
// Cost counts them.
func (p *Program) InstrFlops(i int) float64 {
	in := &p.Instrs[i]
	return p.instrFlops(in, float64(p.Plan.Buffers[in.Out].Shape.Size()))
}

func (p *Program) instrFlops(in *Instr, out float64) float64 {
	if f := lowerings[in.Op].flops; f != nil {
		return f(in, out)
	}
	return out
}
