package cli

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// signals turns the first SIGTERM or SIGINT into a closed channel (the
// trainer's Interrupt) and remembers which it was; after it, the signals
// are no longer caught, so a second one ends the process at once (the
// Kubernetes and Slurm contract: SIGTERM, a grace period, SIGKILL).
type signals struct {
	fired chan struct{}
	ch    chan os.Signal
	mu    sync.Mutex
	got   os.Signal
	once  sync.Once
}

func onSignals() *signals {
	s := &signals{fired: make(chan struct{}), ch: make(chan os.Signal, 1)}
	signal.Notify(s.ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig, ok := <-s.ch
		if !ok {
			return
		}
		signal.Stop(s.ch)
		s.mu.Lock()
		s.got = sig
		s.mu.Unlock()
		close(s.fired)
	}()
	return s
}

// signal returns the signal that fired (nil if none).
func (s *signals) signal() os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

// release stops catching the signals.
func (s *signals) release() {
	s.once.Do(func() {
		signal.Stop(s.ch)
		close(s.ch)
	})
}

// signalNumber returns sig's number (SIGTERM 15, SIGINT 2), 0 if unknown.
func signalNumber(sig os.Signal) int {
	if n, ok := sig.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}

// signalName returns "SIGTERM", "SIGINT" or sig's own name.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case nil:
		return "a signal"
	}
	return sig.String()
}
