package graph

import "github.com/headroom-ml/headroom/tensor"

func unary(op Op, x *Node) *Node {
	if !x.dtype.IsFloat() {
		x.g.throw(op, "needs a floating-point operand, got %s%v", x.dtype, x.shape)
	}
	return x.g.add(op, x.dtype, x.shape, Attr{}, x)
}

// Neg returns -x.
func Neg(x *Node) *Node { return unary(OpNeg, x) }

// Exp returns e**x elementwise.
func Exp(x *Node) *Node { return unary(OpExp, x) }

// Log returns the natural logarithm of x elementwise.
func Log(x *Node) *Node { return unary(OpLog, x) }

// Sqrt returns the square root of x elementwise.
func Sqrt(x *Node) *Node { return unary(OpSqrt, x) }

// Relu returns max(x, 0) elementwise.
func Relu(x *Node) *Node { return unary(OpRelu, x) }

// Sigmoid returns 1/(1+e**-x) elementwise.
func Sigmoid(x *Node) *Node { return unary(OpSigmoid, x) }

// Tanh returns the hyperbolic tangent of x elementwise.
func Tanh(x *Node) *Node { return unary(OpTanh, x) }

// Erf returns the error function of x elementwise.
func Erf(x *Node) *Node { return unary(OpErf, x) }

// Abs returns |x| elementwise.
func Abs(x *Node) *Node { return unary(OpAbs, x) }

// Cast converts x to dtype (float to int truncates toward zero; to a 16-bit
// float rounds to nearest even). Casting to x's own dtype returns x.
func Cast(x *Node, dtype tensor.DType) *Node {
	if !dtype.Valid() {
		x.g.throw(OpCast, "invalid target dtype %v", dtype)
	}
	if dtype == x.dtype {
		return x
	}
	return x.g.add(OpCast, dtype, x.shape, Attr{}, x)
}

func binary(op Op, a, b *Node) *Node {
	g := a.g
	if a.g != b.g {
		g.throw(op, "operands belong to different graphs")
	}
	if a.dtype != b.dtype {
		g.throw(op, "dtype mismatch: %s%v vs %s%v (use Cast)", a.dtype, a.shape, b.dtype, b.shape)
	}
	if !a.dtype.IsFloat() {
		g.throw(op, "needs floating-point operands, got %s%v and %s%v", a.dtype, a.shape, b.dtype, b.shape)
	}
	out, err := tensor.Broadcast(a.shape, b.shape)
	if err != nil {
		g.throw(op, "shapes %v and %v do not broadcast", a.shape, b.shape)
	}
	return g.add(op, a.dtype, out, Attr{}, a, b)
}

// Add returns a+b with broadcasting.
func Add(a, b *Node) *Node { return binary(OpAdd, a, b) }

// Sub returns a-b with broadcasting.
func Sub(a, b *Node) *Node { return binary(OpSub, a, b) }

// Mul returns a*b with broadcasting.
func Mul(a, b *Node) *Node { return binary(OpMul, a, b) }

// Div returns a/b with broadcasting.
func Div(a, b *Node) *Node { return binary(OpDiv, a, b) }

// Maximum returns the elementwise maximum of a and b with broadcasting.
func Maximum(a, b *Node) *Node { return binary(OpMaximum, a, b) }

// Minimum returns the elementwise minimum of a and b with broadcasting.
func Minimum(a, b *Node) *Node { return binary(OpMinimum, a, b) }

// AddScalar returns x+v.
func AddScalar(x *Node, v float64) *Node { return Add(x, ScalarLike(x, v)) }

// MulScalar returns x*v.
func MulScalar(x *Node, v float64) *Node { return Mul(x, ScalarLike(x, v)) }

// Square returns x*x.
func Square(x *Node) *Node { return Mul(x, x) }

func compare(op Op, a, b *Node) *Node {
	g := a.g
	if a.dtype != b.dtype {
		g.throw(op, "dtype mismatch: %s%v vs %s%v (use Cast)", a.dtype, a.shape, b.dtype, b.shape)
	}
	switch a.dtype {
	case tensor.Float16, tensor.BFloat16, tensor.Bool:
		g.throw(op, "compare %s values: Cast to float32 first", a.dtype)
	}
	out, err := tensor.Broadcast(a.shape, b.shape)
	if err != nil {
		g.throw(op, "shapes %v and %v do not broadcast", a.shape, b.shape)
	}
	return g.add(op, tensor.Bool, out, Attr{}, a, b)
}

// Equal returns a == b elementwise, as Bool, with broadcasting.
func Equal(a, b *Node) *Node { return compare(OpEqual, a, b) }

// NotEqual returns a != b elementwise, as Bool.
func NotEqual(a, b *Node) *Node { return compare(OpNotEqual, a, b) }

// Less returns a < b elementwise, as Bool.
func Less(a, b *Node) *Node { return compare(OpLess, a, b) }

// LessEqual returns a <= b elementwise, as Bool.
func LessEqual(a, b *Node) *Node { return compare(OpLessEqual, a, b) }

// Greater returns a > b elementwise, as Bool.
func Greater(a, b *Node) *Node { return compare(OpGreater, a, b) }

// GreaterEqual returns a >= b elementwise, as Bool.
func GreaterEqual(a, b *Node) *Node { return compare(OpGreaterEqual, a, b) }

// Where returns a where cond is true and b elsewhere, broadcasting all three.
func Where(cond, a, b *Node) *Node {
	g := cond.g
	if cond.dtype != tensor.Bool {
		g.throw(OpWhere, "condition must be bool, got %s%v", cond.dtype, cond.shape)
	}
	if a.dtype != b.dtype {
		g.throw(OpWhere, "dtype mismatch: %s%v vs %s%v", a.dtype, a.shape, b.dtype, b.shape)
	}
	s, err := tensor.Broadcast(a.shape, b.shape)
	if err == nil {
		s, err = tensor.Broadcast(cond.shape, s)
	}
	if err != nil {
		g.throw(OpWhere, "shapes %v, %v and %v do not broadcast", cond.shape, a.shape, b.shape)
	}
	return g.add(OpWhere, a.dtype, s, Attr{}, cond, a, b)
}
