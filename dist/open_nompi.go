//go:build !mpi

package dist

import "os"

// Open returns the job's communicator. This binary was built without -tags
// mpi, so it is Single(), or an error when the environment shows that the
// process was launched (by mpirun, srun, ...) as one of several: N copies of
// a single-process run would each train alone and overwrite each other's
// checkpoints.
func Open(opts Options) (Comm, error) {
	if _, err := opts.timeout(); err != nil {
		return nil, err
	}
	if l := detectLaunch(os.Getenv); !l.single() {
		return nil, l.errNoMPI()
	}
	return Single(), nil
}
