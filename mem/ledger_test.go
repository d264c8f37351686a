package mem

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLedgerBudget(t *testing.T) {
	l := NewLedger("host", 1000)
	if err := l.Charge(Param, "dense1/w", 600); err != nil {
		t.Fatal(err)
	}
	if err := l.Charge(OptState, "adam/m", 300); err != nil {
		t.Fatal(err)
	}
	err := l.Charge(Activation, "conv2", 101)
	var oom *OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("charge past the budget: got %v, want *OOMError", err)
	}
	want := OOMError{Ledger: "host", Category: Activation, Owner: "conv2", Request: 101, Budget: 1000, Live: 900, LargestFree: -1}
	if oom.Ledger != want.Ledger || oom.Category != want.Category || oom.Owner != want.Owner ||
		oom.Request != want.Request || oom.Budget != want.Budget || oom.Live != want.Live || oom.LargestFree != want.LargestFree {
		t.Errorf("got %+v, want %+v", *oom, want)
	}
	if len(oom.Top) != 2 || oom.Top[0].Owner != "dense1/w" || oom.Top[0].Bytes != 600 || oom.Top[1].Owner != "adam/m" {
		t.Errorf("Top = %+v, want dense1/w (600) then adam/m (300)", oom.Top)
	}
	msg := oom.Error()
	for _, s := range []string{"out of memory on host", "conv2", "param=600 B", "optstate=300 B", "dense1/w", "adam/m", "budget 1000 B"} {
		if !strings.Contains(msg, s) {
			t.Errorf("Error() = %q, want it to contain %q", msg, s)
		}
	}
	if l.Live() != 900 {
		t.Errorf("Live = %d after a refused charge, want 900 (nothing charged)", l.Live())
	}
	if err := l.Charge(Activation, "conv2", 100); err != nil {
		t.Errorf("charge to exactly the budget: %v", err)
	}
	if l.Live() != 1000 {
		t.Errorf("Live = %d, want 1000", l.Live())
	}
	if err := l.Charge(Workspace, "tmp", 0); err != nil {
		t.Errorf("zero-byte charge at the budget: %v", err)
	}
}

func TestLedgerLargestFreeInOOM(t *testing.T) {
	l := NewLedger("sim", 100)
	l.SetLargestFree(func() int64 { return 42 })
	err := l.Charge(Param, "w", 200)
	var oom *OOMError
	if !errors.As(err, &oom) || oom.LargestFree != 42 {
		t.Fatalf("got %v, want *OOMError with LargestFree 42", err)
	}
	if !strings.Contains(oom.Error(), "largest free block 42 B") {
		t.Errorf("Error() = %q, want the largest free block", oom.Error())
	}
}

func TestLedgerSub(t *testing.T) {
	root := NewLedger("host", 1000)
	data := root.Sub("data", 300)
	model := root.Sub("model", 0) // only the root's budget applies
	steps := []struct {
		name    string
		l       *Ledger
		cat     Category
		bytes   int64
		refuser string // "" when the charge must succeed
	}{
		{"data within its budget", data, Input, 250, ""},
		{"data past its own budget", data, Input, 51, "data"},
		{"data to exactly its budget", data, Input, 50, ""},
		{"model within the root", model, Param, 600, ""},
		{"model past the root", model, Param, 101, "host"},
		{"model to the root's budget", model, Param, 100, ""},
	}
	for _, s := range steps {
		err := s.l.Charge(s.cat, s.name, s.bytes)
		var oom *OOMError
		switch {
		case s.refuser == "" && err != nil:
			t.Errorf("%s: %v", s.name, err)
		case s.refuser != "" && (!errors.As(err, &oom) || oom.Ledger != s.refuser):
			t.Errorf("%s: got %v, want *OOMError from %q", s.name, err, s.refuser)
		}
	}
	if got := [3]int64{root.Live(), data.Live(), model.Live()}; got != [3]int64{1000, 300, 700} {
		t.Errorf("Live of root, data, model = %v, want [1000 300 700]", got)
	}
	if got := root.LiveBy(Input); got != 300 {
		t.Errorf("root LiveBy(input) = %d, want 300", got)
	}
	data.Release(Input, "data within its budget", 250)
	if got := [2]int64{root.Live(), data.Live()}; got != [2]int64{750, 50} {
		t.Errorf("after release: root, data Live = %v, want [750 50]", got)
	}
	if got := root.Totals(); got[Param] != 700 || got[Input] != 50 {
		t.Errorf("root Totals = %v, want param 700, input 50", got)
	}
}

func TestChargeWaitBlocksUntilRelease(t *testing.T) {
	l := NewLedger("pipeline", 100)
	if err := l.Charge(Input, "batch0", 80); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a broken ChargeWait from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.ChargeWait(ctx, Input, "batch1", 50) }()
	for i := 0; i < 100; i++ { // give the waiter every chance to finish early
		select {
		case err := <-done:
			t.Fatalf("ChargeWait returned %v before any release; it must wait", err)
		default:
			time.Sleep(time.Millisecond)
		}
	}
	l.Release(Input, "batch0", 80)
	if err := <-done; err != nil {
		t.Fatalf("ChargeWait after release: %v", err)
	}
	if l.Live() != 50 {
		t.Errorf("Live = %d, want 50", l.Live())
	}
}

func TestChargeWaitManyWaiters(t *testing.T) {
	l := NewLedger("pipeline", 100)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if err := l.ChargeWait(ctx, Input, "stage", 30); err != nil {
					errs <- err
					return
				}
				if live := l.Live(); live > 100 {
					errs <- errors.New("live bytes passed the budget")
					return
				}
				l.Release(Input, "stage", 30)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if l.Live() != 0 || l.Peak() > 100 {
		t.Errorf("Live %d, Peak %d; want 0 and at most the budget 100", l.Live(), l.Peak())
	}
}

func TestChargeWaitCancelled(t *testing.T) {
	l := NewLedger("pipeline", 100)
	if err := l.Charge(Input, "batch0", 100); err != nil {
		t.Fatal(err)
	}
	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := l.ChargeWait(ctx, Input, "batch1", 10); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
	})
	t.Run("while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.ChargeWait(ctx, Input, "batch1", 10) }()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("got %v, want context.Canceled", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("ChargeWait did not return after its context was cancelled")
		}
	})
	if l.Live() != 100 {
		t.Errorf("Live = %d, want 100 (cancelled waits charge nothing)", l.Live())
	}
}

func TestChargeWaitLargerThanBudget(t *testing.T) {
	l := NewLedger("pipeline", 100)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := l.ChargeWait(ctx, Input, "huge", 101)
	var oom *OOMError
	if !errors.As(err, &oom) || oom.Request != 101 {
		t.Fatalf("got %v, want an immediate *OOMError for 101 bytes", err)
	}
	if ctx.Err() != nil {
		t.Errorf("ChargeWait waited until its deadline; want an immediate failure")
	}
}

func TestSnapshotGrowth(t *testing.T) {
	l := NewLedger("host", 0)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Charge(Param, "w", 1000))
	must(l.Charge(Activation, "cache", 100))
	epoch1 := l.Snapshot()
	if len(epoch1.Growth(epoch1)) != 0 {
		t.Errorf("a snapshot grew against itself: %v", epoch1.Growth(epoch1))
	}
	must(l.Charge(Activation, "cache", 50))
	must(l.Charge(Workspace, "leak", 70))
	l.Release(Param, "w", 1000)
	epoch2 := l.Snapshot()
	got := epoch2.Growth(epoch1)
	want := []Entry{{Owner: "leak", Category: Workspace, Bytes: 70, Count: 1}, {Owner: "cache", Category: Activation, Bytes: 50, Count: 2}}
	if len(got) != len(want) {
		t.Fatalf("Growth = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Growth[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if epoch2.Live != 220 || epoch2.Totals[Param] != 0 || epoch2.Totals[Activation] != 150 {
		t.Errorf("snapshot Live %d, Totals %v; want 220 with activation 150 and param 0", epoch2.Live, epoch2.Totals)
	}
}

func TestPeak(t *testing.T) {
	l := NewLedger("host", 0)
	_ = l.Charge(Param, "w", 500)
	_ = l.Charge(Activation, "a", 300)
	l.Release(Activation, "a", 300)
	_ = l.Charge(Workspace, "t", 100)
	if l.Peak() != 800 {
		t.Errorf("Peak = %d, want 800", l.Peak())
	}
	if pt := l.PeakTotals(); pt[Param] != 500 || pt[Activation] != 300 || pt[Workspace] != 0 {
		t.Errorf("PeakTotals = %v, want param 500, activation 300", pt)
	}
	l.ResetPeak()
	if l.Peak() != 600 {
		t.Errorf("Peak after ResetPeak = %d, want the live 600", l.Peak())
	}
	_ = l.Charge(Workspace, "t", 50)
	if l.Peak() != 650 {
		t.Errorf("Peak = %d, want 650", l.Peak())
	}
}

func TestReleaseMisuse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		owner string
		bytes int64
	}{
		{"more than charged", "w", 101},
		{"unknown owner", "nobody", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLedger("host", 0)
			_ = l.Charge(Param, "w", 100)
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "mem: ") {
					t.Errorf("panic %q, want a \"mem: ...\" panic", msg)
				}
				if l.Live() != 100 {
					t.Errorf("Live = %d after the bad release, want 100", l.Live())
				}
			}()
			l.Release(Param, tc.owner, tc.bytes)
		})
	}
}

func TestCategoryNames(t *testing.T) {
	for c := Category(0); c < NumCategories; c++ {
		got, err := ParseCategory(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCategory(%q) = %v, %v; want %v", c.String(), got, err, c)
		}
	}
	if _, err := ParseCategory("weights"); err == nil {
		t.Errorf("ParseCategory(\"weights\") succeeded, want an error")
	}
	if got := Category(99).String(); got != "category(99)" {
		t.Errorf("Category(99).String() = %q, want \"category(99)\"", got)
	}
	for _, tc := range []struct{ in, want int64 }{{0, 0}, {1, 64}, {64, 64}, {65, 128}, {4095, 4096}} {
		if got := Align(tc.in); got != tc.want {
			t.Errorf("Align(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
