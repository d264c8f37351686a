package mem

import "testing"

func TestMoveKeepsLiveAndPeak(t *testing.T) {
	l := NewLedger("t", 1000)
	if err := l.Charge(Workspace, "arena", 640); err != nil {
		t.Fatal(err)
	}
	l.Move(Workspace, Activation, "arena", 256)
	if got, want := l.Live(), int64(640); got != want {
		t.Errorf("live %d, want %d", got, want)
	}
	if got, want := l.Peak(), int64(640); got != want {
		t.Errorf("peak %d, want %d", got, want)
	}
	tot := l.Totals()
	if tot[Workspace] != 384 || tot[Activation] != 256 {
		t.Errorf("totals workspace=%d activation=%d, want 384 and 256", tot[Workspace], tot[Activation])
	}
	l.Move(Activation, Workspace, "arena", 256)
	l.Release(Workspace, "arena", 640)
	if l.Live() != 0 || len(l.Top(0)) != 0 {
		t.Errorf("after release: live %d, top %v; want nothing", l.Live(), l.Top(0))
	}
	defer func() {
		if recover() == nil {
			t.Error("moving more than was charged did not panic")
		}
	}()
	l.Move(Workspace, Activation, "arena", 1)
}
