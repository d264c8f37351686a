//go:build mpi

package dist

import "testing"

// TestOpenUnlaunched: built with -tags mpi but not started by a launcher,
// Open is Single() and does not initialize MPI.
func TestOpenUnlaunched(t *testing.T) {
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"} {
		t.Setenv(k, "")
	}
	c, err := Open(Options{})
	if err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	if c.Rank() != 0 || c.Size() != 1 {
		t.Errorf("Rank, Size: got %d, %d, want 0, 1", c.Rank(), c.Size())
	}
	if _, ok := c.(*single); !ok {
		t.Errorf("got %T, want the single-process communicator", c)
	}
	if opened.Load() {
		t.Errorf("MPI was initialized")
	}
}
