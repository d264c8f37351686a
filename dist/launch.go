package dist

import (
	"fmt"
	"strconv"
)

// launch is what the environment says about how this process was started.
type launch struct {
	launched bool   // started by mpirun, srun or another PMI/PMIx launcher
	by       string // the variable that shows it, e.g. "OMPI_COMM_WORLD_SIZE"
	size     int    // number of processes; -1 when the environment does not say
	rank     int    // this process's rank; -1 when the environment does not say
}

// detectLaunch reads the variables launchers set in every process they
// start:
//   - Open MPI's mpirun: OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK;
//   - PMI-1/PMI-2 (MPICH's hydra, srun --mpi=pmi2): PMI_SIZE and PMI_RANK;
//   - PMIx (srun --mpi=pmix, prterun): PMIX_RANK, with the size from
//     Slurm's SLURM_STEP_NUM_TASKS or SLURM_NTASKS when present.
//
// Slurm's variables alone do not count: a batch script's own shell has them.
func detectLaunch(getenv func(string) string) launch {
	num := func(name string) int {
		v := getenv(name)
		if v == "" {
			return -1
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return -1
		}
		return n
	}
	for _, p := range [...]struct{ size, rank string }{
		{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
		{"PMI_SIZE", "PMI_RANK"},
	} {
		if getenv(p.size) != "" {
			return launch{launched: true, by: p.size, size: num(p.size), rank: num(p.rank)}
		}
	}
	if getenv("PMIX_RANK") != "" {
		size := num("SLURM_STEP_NUM_TASKS")
		if size < 0 {
			size = num("SLURM_NTASKS")
		}
		return launch{launched: true, by: "PMIX_RANK", size: size, rank: num("PMIX_RANK")}
	}
	return launch{size: 1, rank: 0}
}

// single reports whether the launch is one process as far as the
// environment can tell (an unknown size with rank 0 counts as one).
func (l launch) single() bool {
	return !l.launched || l.size == 1 || (l.size < 0 && l.rank <= 0)
}

// errNoMPI is Open's error in a binary built without -tags mpi that was
// launched as one of several processes.
func (l launch) errNoMPI() error {
	n := "several"
	if l.size > 0 {
		n = strconv.Itoa(l.size)
	}
	return fmt.Errorf("dist: this binary was built without -tags mpi, but %s shows it was launched as one of %s processes (rank %d); "+
		"rebuild with -tags mpi (needs cgo and Open MPI: apt-get install openmpi-bin libopenmpi-dev pkg-config)", l.by, n, l.rank)
}
