//go:build !mpi

package dist

import (
	"strings"
	"testing"
)

// TestOpenWithoutMPI: without -tags mpi, Open is Single() unless the
// environment shows several launched processes.
func TestOpenWithoutMPI(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		opts Options
		err  string // "" for Single()
	}{
		{"plain", nil, Options{}, ""},
		{"mpirun -np 1", map[string]string{"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}, Options{}, ""},
		{"mpirun -np 2", map[string]string{"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}, Options{}, "built without -tags mpi"},
		{"srun --mpi=pmix -n 4", map[string]string{"PMIX_RANK": "0", "SLURM_STEP_NUM_TASKS": "4"}, Options{}, "one of 4 processes"},
		{"negative timeout", nil, Options{Timeout: -1}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"} {
				t.Setenv(k, tc.env[k])
			}
			c, err := Open(tc.opts)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("got error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if c.Rank() != 0 || c.Size() != 1 {
				t.Errorf("Rank, Size: got %d, %d, want 0, 1", c.Rank(), c.Size())
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: got %v, want nil", err)
			}
		})
	}
}
