package mem_test

import (
	"errors"
	"fmt"

	"github.com/headroom-ml/headroom/mem"
)

// A runtime reserves its buffers through an Allocator that charges a ledger
// with a hard budget; a request past the budget is an *OOMError.
func ExampleAllocator() {
	ledger := mem.NewLedger("sim", 3<<20) // a 3 MiB budget
	alloc := mem.NewAllocator(mem.NewSimulated("sim", 1<<30), ledger, mem.AllocatorOptions{ChunkSize: 4 << 20})

	w, _ := alloc.Alloc(2<<20, mem.Param, "dense1/w")
	act, _ := alloc.Alloc(1000, mem.Activation, "dense1") // charged as Align(1000) = 1024 bytes
	fmt.Println(w.Size(), act.Size(), ledger.Live())

	_, err := alloc.Alloc(1<<20, mem.Activation, "dense2")
	var oom *mem.OOMError
	if errors.As(err, &oom) {
		fmt.Printf("refused %s for %s; largest live owner %s\n", mem.FormatBytes(oom.Request), oom.Owner, oom.Top[0].Owner)
	}

	alloc.Free(act)
	alloc.Free(w)
	fmt.Println(ledger.Live(), ledger.Peak(), alloc.Stats().Mapped)
	// Output:
	// 2097152 1024 2098176
	// refused 1.00 MiB for dense2; largest live owner dense1/w
	// 0 2098176 0
}
