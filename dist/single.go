package dist

import (
	"sync/atomic"

	"github.com/headroom-ml/headroom/tensor"
)

// Single returns the communicator of a process that is the whole job (Rank
// 0, Size 1). A sum over one rank is the buffer itself and a gather is a
// copy, so every collective is a copy or nothing; arguments are checked as
// the MPI communicator checks them, so code that is wrong for N ranks fails
// alike on one. It never allocates.
func Single() Comm { return &single{} }

type single struct{ closed atomic.Bool }

// done is the Request of a collective that completed when it started.
type done struct{}

func (done) Wait() error { return nil }

func (s *single) Rank() int { return 0 }
func (s *single) Size() int { return 1 }

func (s *single) AllReduceSum(buf []byte, dtype tensor.DType) error {
	if _, err := reduceElems("AllReduceSum", buf, dtype); err != nil {
		return err
	}
	return s.open()
}

func (s *single) Start(buf []byte, dtype tensor.DType) (Request, error) {
	if _, err := reduceElems("Start", buf, dtype); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	return done{}, nil
}

func (s *single) ReduceScatterSum(send, recv []byte, dtype tensor.DType) error {
	if _, err := reduceElems("ReduceScatterSum", send, dtype); err != nil {
		return err
	}
	if _, err := blockLayout("ReduceScatterSum", send, recv, 1, 0); err != nil {
		return err
	}
	if err := s.open(); err != nil {
		return err
	}
	copy(recv, send)
	return nil
}

func (s *single) AllGather(send, recv []byte) error {
	if _, err := blockLayout("AllGather", recv, send, 1, 0); err != nil {
		return err
	}
	if err := s.open(); err != nil {
		return err
	}
	copy(recv, send)
	return nil
}

func (s *single) StartReduceScatter(send, recv []byte, dtype tensor.DType) (Request, error) {
	if err := s.ReduceScatterSum(send, recv, dtype); err != nil {
		return nil, err
	}
	return done{}, nil
}

func (s *single) StartAllGather(send, recv []byte) (Request, error) {
	if err := s.AllGather(send, recv); err != nil {
		return nil, err
	}
	return done{}, nil
}

func (s *single) Broadcast(buf []byte, root int) error {
	if err := checkRoot(root, 1); err != nil {
		return err
	}
	return s.open()
}

func (s *single) Barrier() error { return s.open() }

func (s *single) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	return nil
}

func (s *single) open() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}
