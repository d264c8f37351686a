package mem

import "fmt"

// Category is the ledger key that says what a buffer is for. Every report
// uses these names.
type Category uint8

// The categories, in report order.
const (
	Param      Category = iota // trainable weights
	Grad                       // gradients of the weights
	OptState                   // optimizer state (Adam m and v, master weights)
	Activation                 // forward values saved for the backward pass
	Workspace                  // temporaries of a step, constants
	Input                      // input pipeline buffers and staged batches
	IO                         // checkpoint and file buffers
	NumCategories
)

var categoryNames = [NumCategories]string{"param", "grad", "optstate", "activation", "workspace", "input", "io"}

// String returns the category's report name ("param", "grad", ...).
func (c Category) String() string {
	if c < NumCategories {
		return categoryNames[c]
	}
	return fmt.Sprintf("category(%d)", uint8(c))
}

// ParseCategory returns the category named s.
func ParseCategory(s string) (Category, error) {
	for i, n := range categoryNames {
		if n == s {
			return Category(i), nil
		}
	}
	return 0, fmt.Errorf("mem: unknown category %q", s)
}

// Alignment is the byte alignment of every buffer: a cache line, and the
// width of an AVX-512 register.
const Alignment = 64

// Align rounds n up to a multiple of Alignment. Plans size buffers with Align
// so that planned bytes and charged bytes agree exactly.
func Align(n int64) int64 { return (n + Alignment - 1) &^ (Alignment - 1) }
