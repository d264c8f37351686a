package interp

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/x448/float16"
)

// integer decodes the integer, bit and predicate operations.
func (d *decoder) integer(base string, mods []string, t typ) error {
	in := d.in
	m := t.mask()
	signed := t.kind == 's'
	mod := strings.Join(mods, ".")
	bin := func(f func(x, y uint64) uint64) error {
		if err := d.regs(3); err != nil {
			return err
		}
		in.exec = func(th *thread, in *inst) ctl {
			th.regs[in.d] = f(th.regs[in.a]&m, th.regs[in.b]&m) & m
			return ctlNext
		}
		return nil
	}
	switch {
	case (base == "add" || base == "sub") && mod == "":
		if base == "add" {
			return bin(func(x, y uint64) uint64 { return x + y })
		}
		return bin(func(x, y uint64) uint64 { return x - y })
	case base == "mul" && mod == "lo":
		return bin(func(x, y uint64) uint64 { return x * y })
	case base == "mul" && mod == "wide" && t.bits == 32:
		if err := d.regs(3); err != nil {
			return err
		}
		in.exec = func(th *thread, in *inst) ctl {
			x, y := th.regs[in.a]&m, th.regs[in.b]&m
			if signed {
				th.regs[in.d] = uint64(t.sext(x) * t.sext(y))
			} else {
				th.regs[in.d] = x * y
			}
			return ctlNext
		}
		return nil
	case base == "mad" && mod == "lo":
		if err := d.regs(4); err != nil {
			return err
		}
		in.exec = func(th *thread, in *inst) ctl {
			th.regs[in.d] = (th.regs[in.a]*th.regs[in.b] + th.regs[in.c]) & m
			return ctlNext
		}
		return nil
	case (base == "div" || base == "rem") && mod == "" && t.kind != 'b':
		isDiv := base == "div"
		if err := d.regs(3); err != nil {
			return err
		}
		in.exec = func(th *thread, in *inst) ctl {
			x, y := th.regs[in.a]&m, th.regs[in.b]&m
			if y == 0 {
				return th.fail(in, "integer division by zero")
			}
			var r uint64
			switch {
			case signed && isDiv:
				r = uint64(t.sext(x) / t.sext(y))
			case signed:
				r = uint64(t.sext(x) % t.sext(y))
			case isDiv:
				r = x / y
			default:
				r = x % y
			}
			th.regs[in.d] = r & m
			return ctlNext
		}
		return nil
	case (base == "min" || base == "max") && mod == "" && t.kind != 'b':
		isMin := base == "min"
		return bin(func(x, y uint64) uint64 {
			less := x < y
			if signed {
				less = t.sext(x) < t.sext(y)
			}
			if less == isMin {
				return x
			}
			return y
		})
	case base == "and" && mod == "":
		return bin(func(x, y uint64) uint64 { return x & y })
	case base == "or" && mod == "":
		return bin(func(x, y uint64) uint64 { return x | y })
	case base == "xor" && mod == "":
		return bin(func(x, y uint64) uint64 { return x ^ y })
	case base == "not" && mod == "":
		if err := d.regs(2); err != nil {
			return err
		}
		in.exec = func(th *thread, in *inst) ctl { th.regs[in.d] = ^th.regs[in.a] & m; return ctlNext }
		return nil
	case base == "shl" && mod == "":
		return bin(func(x, y uint64) uint64 {
			if y >= uint64(t.bits) {
				return 0
			}
			return x << y
		})
	case base == "shr" && mod == "":
		return bin(func(x, y uint64) uint64 {
			if signed {
				return uint64(t.sext(x) >> min(y, 63))
			}
			if y >= uint64(t.bits) {
				return 0
			}
			return x >> y
		})
	case base == "bfe" && mod == "" && t == typ{'u', 32}:
		if err := d.regs(4); err != nil {
			return err
		}
		in.exec = func(th *thread, in *inst) ctl {
			x, pos, n := th.regs[in.a]&m, th.regs[in.b]&0xff, th.regs[in.c]&0xff
			var r uint64
			if n > 0 && pos < 32 {
				r = (x >> pos) & (1<<min(n, 32) - 1)
			}
			th.regs[in.d] = r
			return ctlNext
		}
		return nil
	}
	return fmt.Errorf("unknown instruction %s", d.src.Op)
}

// float decodes the float32 and float64 arithmetic: every rounding is
// to nearest even (.rn, the only rounding the renderer writes; a plain
// add, sub or mul is taken as .rn too), subnormals kept.
func (d *decoder) float(base string, mods []string, t typ) error {
	in := d.in
	for _, m := range mods {
		if m != "rn" {
			return fmt.Errorf("modifier .%s is not run (only .rn)", m)
		}
	}
	if t.bits == 16 {
		return errors.New(".f16 arithmetic is not run")
	}
	single := t.bits == 32
	un := func(f32f func(float32) float32, f64f func(float64) float64) error {
		if err := d.regs(2); err != nil {
			return err
		}
		if single {
			in.exec = func(th *thread, in *inst) ctl { th.regs[in.d] = b32(f32f(f32(th.regs[in.a]))); return ctlNext }
		} else {
			in.exec = func(th *thread, in *inst) ctl { th.regs[in.d] = b64(f64f(f64(th.regs[in.a]))); return ctlNext }
		}
		return nil
	}
	bin := func(f32f func(x, y float32) float32, f64f func(x, y float64) float64) error {
		if err := d.regs(3); err != nil {
			return err
		}
		if single {
			in.exec = func(th *thread, in *inst) ctl {
				th.regs[in.d] = b32(f32f(f32(th.regs[in.a]), f32(th.regs[in.b])))
				return ctlNext
			}
		} else {
			in.exec = func(th *thread, in *inst) ctl {
				th.regs[in.d] = b64(f64f(f64(th.regs[in.a]), f64(th.regs[in.b])))
				return ctlNext
			}
		}
		return nil
	}
	switch base {
	case "add":
		return bin(func(x, y float32) float32 { return x + y }, func(x, y float64) float64 { return x + y })
	case "sub":
		return bin(func(x, y float32) float32 { return x - y }, func(x, y float64) float64 { return x - y })
	case "mul":
		return bin(func(x, y float32) float32 { return x * y }, func(x, y float64) float64 { return x * y })
	case "div":
		if len(mods) != 1 {
			return errors.New("div on floats is div.rn")
		}
		return bin(func(x, y float32) float32 { return x / y }, func(x, y float64) float64 { return x / y })
	case "min", "max":
		// PTX: a NaN operand gives the other one
		isMin := base == "min"
		pick := func(x, y float64) float64 {
			switch {
			case x != x:
				return y
			case y != y:
				return x
			case isMin:
				return math.Min(x, y)
			}
			return math.Max(x, y)
		}
		return bin(func(x, y float32) float32 { return float32(pick(float64(x), float64(y))) }, pick)
	case "neg":
		return un(func(x float32) float32 { return -x }, func(x float64) float64 { return -x })
	case "abs":
		return un(func(x float32) float32 { return float32(math.Abs(float64(x))) }, math.Abs)
	case "sqrt":
		if len(mods) != 1 {
			return errors.New("sqrt is sqrt.rn")
		}
		return un(func(x float32) float32 { return float32(math.Sqrt(float64(x))) }, math.Sqrt)
	case "fma":
		if len(mods) != 1 {
			return errors.New("fma is fma.rn")
		}
		if err := d.regs(4); err != nil {
			return err
		}
		if single {
			// the exact product plus c rounded to float64, then to float32:
			// a double rounding, which can differ from a single one in the
			// last bit in rare ties (the renderer writes no f32 fma)
			in.exec = func(th *thread, in *inst) ctl {
				r := math.FMA(float64(f32(th.regs[in.a])), float64(f32(th.regs[in.b])), float64(f32(th.regs[in.c])))
				th.regs[in.d] = b32(float32(r))
				return ctlNext
			}
		} else {
			in.exec = func(th *thread, in *inst) ctl {
				th.regs[in.d] = b64(math.FMA(f64(th.regs[in.a]), f64(th.regs[in.b]), f64(th.regs[in.c])))
				return ctlNext
			}
		}
		return nil
	}
	return fmt.Errorf("unknown instruction %s", d.src.Op)
}

// roundInt rounds x to an integer by the cvt rounding mode (rni, rzi, rmi,
// rpi).
func roundInt(mode string, x float64) (float64, bool) {
	switch mode {
	case "rni":
		return math.RoundToEven(x), true
	case "rzi":
		return math.Trunc(x), true
	case "rmi":
		return math.Floor(x), true
	case "rpi":
		return math.Ceil(x), true
	}
	return 0, false
}

// cvt decodes cvt[.mode].dtype.atype.
func (d *decoder) cvt(parts []string) error {
	if len(parts) < 2 || len(parts) > 3 {
		return errors.New("cvt[.mode].dtype.atype")
	}
	mode := ""
	if len(parts) == 3 {
		mode = parts[0]
	}
	dt, ok1 := parseType(parts[len(parts)-2])
	at, ok2 := parseType(parts[len(parts)-1])
	if !ok1 || !ok2 || dt.kind == 'p' || at.kind == 'p' {
		return errors.New("cvt between unknown types")
	}
	if err := d.regs(2); err != nil {
		return err
	}
	in := d.in
	read := func(v uint64) float64 { // a float operand's value
		switch at.bits {
		case 16:
			return float64(float16.Frombits(uint16(v)).Float32())
		case 32:
			return float64(f32(v))
		}
		return f64(v)
	}
	switch {
	case dt.kind == 'f' && at.kind == 'f':
		if mode != "" && mode != "rn" {
			if _, ok := roundInt(mode, 0); !ok || dt != at {
				return fmt.Errorf("cvt.%s.f%d.f%d is not run", mode, dt.bits, at.bits)
			}
		}
		in.exec = func(th *thread, in *inst) ctl {
			x := read(th.regs[in.a])
			if r, ok := roundInt(mode, x); ok {
				x = r
			}
			switch dt.bits {
			case 16:
				th.regs[in.d] = uint64(float16.Fromfloat32(float32(x)).Bits())
			case 32:
				th.regs[in.d] = b32(float32(x))
			default:
				th.regs[in.d] = b64(x)
			}
			return ctlNext
		}
		return nil
	case dt.kind != 'f' && at.kind == 'f':
		if _, ok := roundInt(mode, 0); !ok {
			return fmt.Errorf("cvt from a float to an integer rounds with .rni, .rzi, .rmi or .rpi, not %q", mode)
		}
		lo, hi := 0.0, float64(dt.mask())
		if dt.kind == 's' {
			lo, hi = -math.Ldexp(1, dt.bits-1), math.Ldexp(1, dt.bits-1)-1
		}
		m := dt.mask()
		in.exec = func(th *thread, in *inst) ctl {
			x := read(th.regs[in.a])
			r, _ := roundInt(mode, x)
			switch {
			case x != x:
				r = 0
			case r < lo:
				r = lo
			case r > hi:
				r = hi
			}
			if dt.kind == 's' {
				th.regs[in.d] = uint64(int64(r)) & m
			} else {
				th.regs[in.d] = uint64(r) & m
			}
			return ctlNext
		}
		return nil
	case dt.kind == 'f':
		if mode != "rn" {
			return errors.New("cvt from an integer to a float is cvt.rn")
		}
		am := at.mask()
		in.exec = func(th *thread, in *inst) ctl {
			v := th.regs[in.a] & am
			x := float64(v)
			if at.kind == 's' {
				x = float64(at.sext(v))
			}
			switch dt.bits {
			case 16:
				th.regs[in.d] = uint64(float16.Fromfloat32(float32(x)).Bits())
			case 32:
				th.regs[in.d] = b32(float32(x))
			default:
				th.regs[in.d] = b64(x)
			}
			return ctlNext
		}
		return nil
	}
	if mode != "" {
		return errors.New("cvt between integers takes no rounding")
	}
	am, dm := at.mask(), dt.mask()
	in.exec = func(th *thread, in *inst) ctl {
		v := th.regs[in.a] & am
		if at.kind == 's' {
			v = uint64(at.sext(v))
		}
		th.regs[in.d] = v & dm
		return ctlNext
	}
	return nil
}
