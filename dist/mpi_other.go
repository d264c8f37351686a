//go:build mpi && !linux

package dist

import (
	"errors"
	"os"
)

// Open fails when launched: the MPI communicator (its progress loop polls
// with ppoll) is built for Linux only. An unlaunched process gets Single().
func Open(opts Options) (Comm, error) {
	if _, err := opts.timeout(); err != nil {
		return nil, err
	}
	if l := detectLaunch(os.Getenv); l.launched {
		return nil, errors.New("dist: -tags mpi is supported on Linux only")
	}
	return Single(), nil
}
