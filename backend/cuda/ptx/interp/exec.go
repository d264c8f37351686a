package interp

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// Program is an entry decoded for running: every register, special
// register, immediate and parameter is a slot of a thread's register file
// (uint64 bits: a predicate is 0 or 1, narrower values sit in the low
// bits), and every instruction a function over it.
type Program struct {
	Name     string
	fn       *Func
	code     []inst
	slots    int
	template []uint64 // a thread's register file before it starts: the immediates set
	params   []int    // the slot of each parameter
	shared   int
}

// inst is a decoded instruction.
type inst struct {
	exec       func(t *thread, in *inst) ctl
	guard      int // the guard's slot, or -1
	not        bool
	d, a, b, c int // slots
	off        int64
	width      int  // bytes a memory access moves
	space      byte // 'g' global, 's' shared, 'p' param
	target     int  // a branch's instruction index
	src        *Inst
}

// ctl is what an instruction tells the thread running it.
type ctl uint8

const (
	ctlNext    ctl = iota
	ctlJump        // t.pc was set
	ctlBarrier     // wait at bar.sync
	ctlExit
	ctlFail // t.blk.err was set
)

// The fixed slots: 0 is a scratch slot, then the special registers.
const (
	slotTid    = 1
	slotNTid   = 2
	slotCtaid  = 3
	slotNCtaid = 4
	firstSlot  = 5
)

// Decode decodes entry name of m.
func Decode(m *Module, name string) (*Program, error) {
	f, err := m.Entry(name)
	if err != nil {
		return nil, err
	}
	p := &Program{Name: name, fn: f, shared: f.Shared}
	slot := map[string]int{}
	regs := make([]string, 0, len(f.Regs))
	for r := range f.Regs {
		regs = append(regs, r)
	}
	sort.Strings(regs)
	next := firstSlot
	for _, r := range regs {
		slot[r] = next
		next++
	}
	for name, s := range specialRegs {
		slot[name] = s
	}
	imms := map[uint64]int{}
	var immVals []uint64
	for _, prm := range f.Params {
		slot["param:"+prm] = next
		p.params = append(p.params, next)
		next++
	}
	if f.SharedName != "" { // the shared array's address: 0 in the block's shared memory
		slot["sym:"+f.SharedName] = next
		immVals = append(immVals, 0)
		next++
	}
	immBase := next
	operandSlot := func(o Operand) int {
		switch o.Kind {
		case OpReg:
			return slot[o.Name]
		case OpImm:
			if s, ok := imms[o.Imm]; ok {
				return s
			}
			s := immBase + len(imms)
			imms[o.Imm] = s
			return s
		case OpSymbol:
			if s, ok := slot["sym:"+o.Name]; ok {
				return s
			}
		}
		return -1
	}
	p.code = make([]inst, len(f.Code))
	for i := range f.Code {
		src := &f.Code[i]
		in := &p.code[i]
		in.src = src
		in.guard = -1
		if src.Guard != "" {
			in.guard, in.not = slot[src.Guard], src.GuardNot
		}
		if err := decode(p, f, in, src, operandSlot, slot); err != nil {
			return nil, fmt.Errorf("ptx line %d (%s): %w", src.Line, src.Text, err)
		}
	}
	p.slots = immBase + len(imms)
	p.template = make([]uint64, p.slots)
	copy(p.template[immBase-len(immVals):], immVals)
	for v, s := range imms {
		p.template[s] = v
	}
	return p, nil
}

// Buffer is device memory a launch may touch: Data at device address
// Addr, named in messages.
type Buffer struct {
	Name string
	Addr uint64
	Data []byte
}

// Launch is one kernel launch.
type Launch struct {
	Grid, Block int
	Args        []uint64 // one device address per parameter
	// Buffers is every piece of device memory the launch may read or
	// write: an access outside all of them is an out-of-bounds error.
	Buffers []Buffer
	// Workers runs blocks on this many goroutines (<= 0: GOMAXPROCS, at
	// most 8). Blocks that touch the same global memory other than by
	// atomics are a kernel bug in any case.
	Workers int
}

// Error is a fault found while running a kernel: an out-of-bounds
// access, a shared-memory race between barriers, a barrier not every
// thread reached, or an instruction that cannot run.
type Error struct {
	Kernel        string
	Block, Thread int
	Line          int
	Inst          string
	Msg           string
}

func (e *Error) Error() string {
	return fmt.Sprintf("kernel %s, block %d, thread %d, line %d (%s): %s", e.Kernel, e.Block, e.Thread, e.Line, e.Inst, e.Msg)
}

// Run runs the launch. It returns the first fault any block found.
func (p *Program) Run(l Launch) error {
	if len(l.Args) != len(p.params) {
		return fmt.Errorf("kernel %s takes %d parameters, given %d", p.Name, len(p.params), len(l.Args))
	}
	if l.Block < 1 || l.Block > p.fn.MaxNTid || l.Grid < 0 {
		return fmt.Errorf("kernel %s: %d blocks of %d threads (at most %d a block)", p.Name, l.Grid, l.Block, p.fn.MaxNTid)
	}
	tmpl := append([]uint64(nil), p.template...)
	for k, s := range p.params {
		tmpl[s] = l.Args[k]
	}
	tmpl[slotNTid], tmpl[slotNCtaid] = uint64(l.Block), uint64(l.Grid)
	workers := l.Workers
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), 8)
	}
	workers = max(1, min(workers, l.Grid))
	var (
		mu     sync.Mutex
		first  error
		nextB  int
		atomMu sync.Mutex
		wg     sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			br := newBlockRun(p, l, tmpl, &atomMu)
			for {
				mu.Lock()
				if first != nil || nextB >= l.Grid {
					mu.Unlock()
					return
				}
				b := nextB
				nextB++
				mu.Unlock()
				if err := br.run(b); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// blockRun runs blocks of one launch, one at a time.
type blockRun struct {
	p       *Program
	l       *Launch
	tmpl    []uint64
	threads []thread
	regs    []uint64
	shared  []byte
	race    raceTable
	block   int
	err     error
	last    int // the buffer of the last global access
	atomMu  *sync.Mutex
	steps   int64
}

// maxSteps bounds the instructions one thread runs between barriers: a
// loop that never ends is a fault.
const maxSteps = 1 << 28

func newBlockRun(p *Program, l Launch, tmpl []uint64, atomMu *sync.Mutex) *blockRun {
	br := &blockRun{p: p, l: &l, tmpl: tmpl, atomMu: atomMu, threads: make([]thread, l.Block),
		regs: make([]uint64, l.Block*len(tmpl)), shared: make([]byte, p.shared)}
	br.race.init(p.shared)
	for i := range br.threads {
		br.threads[i] = thread{regs: br.regs[i*len(tmpl) : (i+1)*len(tmpl)], tid: i, blk: br}
	}
	return br
}

// thread is one thread's state.
type thread struct {
	regs    []uint64
	pc      int
	tid     int
	done    bool
	waiting bool
	blk     *blockRun
}

// run runs block b: every thread until it waits at a barrier or exits,
// then again from the barrier, until all have exited.
func (br *blockRun) run(b int) error {
	br.block = b
	for i := range br.threads {
		t := &br.threads[i]
		copy(t.regs, br.tmpl)
		t.regs[slotTid], t.regs[slotCtaid] = uint64(i), uint64(b)
		t.pc, t.done, t.waiting = 0, false, false
	}
	clear(br.shared)
	for {
		br.race.nextEpoch()
		for i := range br.threads {
			t := &br.threads[i]
			if t.done {
				continue
			}
			t.waiting = false
			if err := t.runToBarrier(); err != nil {
				return err
			}
		}
		waiting, exited := 0, 0
		for i := range br.threads {
			if br.threads[i].done {
				exited++
			} else {
				waiting++
			}
		}
		if waiting == 0 {
			return nil
		}
		if exited > 0 {
			for i := range br.threads {
				if !br.threads[i].done {
					t := &br.threads[i]
					return br.fault(t, &br.p.code[t.pc-1], fmt.Sprintf("waits at a barrier %d threads of the block never reach: they exited", exited))
				}
			}
		}
	}
}

// runToBarrier runs t until it waits at a barrier or exits.
func (t *thread) runToBarrier() error {
	code := t.blk.p.code
	for steps := 0; ; steps++ {
		if t.pc >= len(code) {
			t.done = true
			return nil
		}
		if steps > maxSteps {
			return t.blk.fault(t, &code[t.pc], fmt.Sprintf("ran %d instructions without reaching a barrier or the end: a loop that never ends", maxSteps))
		}
		in := &code[t.pc]
		t.pc++
		if in.guard >= 0 && (t.regs[in.guard] != 0) == in.not {
			continue
		}
		switch in.exec(t, in) {
		case ctlBarrier:
			t.waiting = true
			return nil
		case ctlExit:
			t.done = true
			return nil
		case ctlFail:
			return t.blk.err
		}
	}
}

// fault records a fault of thread t at in.
func (br *blockRun) fault(t *thread, in *inst, msg string) error {
	br.err = &Error{Kernel: br.p.Name, Block: br.block, Thread: t.tid, Line: in.src.Line, Inst: in.src.Text, Msg: msg}
	return br.err
}

func (t *thread) fail(in *inst, format string, args ...any) ctl {
	t.blk.fault(t, in, fmt.Sprintf(format, args...))
	return ctlFail
}

// global returns the n bytes at device address a, or a fault naming the
// buffers when they do not lie inside one.
func (t *thread) global(in *inst, a uint64, n int) ([]byte, ctl) {
	br := t.blk
	bufs := br.l.Buffers
	if br.last < len(bufs) {
		if b := &bufs[br.last]; a >= b.Addr && a-b.Addr+uint64(n) <= uint64(len(b.Data)) {
			return b.Data[a-b.Addr : a-b.Addr+uint64(n)], ctlNext
		}
	}
	for k := range bufs {
		b := &bufs[k]
		if a >= b.Addr && a-b.Addr+uint64(n) <= uint64(len(b.Data)) {
			br.last = k
			return b.Data[a-b.Addr : a-b.Addr+uint64(n)], ctlNext
		}
	}
	return nil, t.fail(in, "out-of-bounds access: %d bytes at %#x lie outside every buffer of the launch (%s)", n, a, describe(bufs, a))
}

// describe names the buffer nearest address a.
func describe(bufs []Buffer, a uint64) string {
	var parts []string
	for _, b := range bufs {
		end := b.Addr + uint64(len(b.Data))
		switch {
		case a >= end && a-end < 1<<20:
			parts = append(parts, fmt.Sprintf("%d bytes past the end of %s [%#x, %#x)", a-end, b.Name, b.Addr, end))
		case a < b.Addr && b.Addr-a < 1<<20:
			parts = append(parts, fmt.Sprintf("%d bytes before %s [%#x, %#x)", b.Addr-a, b.Name, b.Addr, end))
		}
	}
	if len(parts) == 0 {
		return "near none of them"
	}
	return strings.Join(parts, "; ")
}

// sharedBytes returns the n shared bytes at a, checked for bounds and
// recorded for the race check (write: the access stores).
func (t *thread) sharedBytes(in *inst, a uint64, n int, write bool) ([]byte, ctl) {
	br := t.blk
	if a+uint64(n) > uint64(len(br.shared)) || a+uint64(n) < a {
		return nil, t.fail(in, "out-of-bounds shared access: %d bytes at %d of a %d-byte array", n, a, len(br.shared))
	}
	if other, kind := br.race.access(int(a), n, t.tid, write); other >= 0 {
		return nil, t.fail(in, "shared-memory race: thread %d %s bytes [%d, %d) that thread %d %s since the last barrier",
			t.tid, map[bool]string{true: "writes", false: "reads"}[write], a, a+uint64(n), other, kind)
	}
	return br.shared[a : a+uint64(n)], ctlNext
}

// raceTable records, per shared byte, the thread that wrote it and the
// threads that read it since the last barrier (an epoch is the time
// between two barriers): a byte written by one thread and read or written
// by another in the same epoch is a race, whatever order the hardware
// would run them in.
type raceTable struct {
	epoch           uint32
	wEpoch, rEpoch  []uint32
	writer          []int32
	reader, reader2 []int32 // the first reader and a second, other one (-1: none)
}

func (r *raceTable) init(n int) {
	r.wEpoch, r.rEpoch = make([]uint32, n), make([]uint32, n)
	r.writer, r.reader, r.reader2 = make([]int32, n), make([]int32, n), make([]int32, n)
}

func (r *raceTable) nextEpoch() { r.epoch++ }

// access records an access of n bytes at a by thread tid and returns
// another thread whose access since the last barrier conflicts with it,
// and how that one touched the bytes, or -1.
func (r *raceTable) access(a, n, tid int, write bool) (int, string) {
	e, id := r.epoch, int32(tid)
	for k := a; k < a+n; k++ {
		if r.wEpoch[k] == e && r.writer[k] != id {
			return int(r.writer[k]), "wrote"
		}
		if write {
			if r.rEpoch[k] == e {
				if r.reader[k] != id {
					return int(r.reader[k]), "read"
				}
				if r.reader2[k] >= 0 {
					return int(r.reader2[k]), "read"
				}
			}
			r.wEpoch[k], r.writer[k] = e, id
			continue
		}
		switch {
		case r.rEpoch[k] != e:
			r.rEpoch[k], r.reader[k], r.reader2[k] = e, id, -1
		case r.reader[k] != id && r.reader2[k] < 0:
			r.reader2[k] = id
		}
	}
	return -1, ""
}
