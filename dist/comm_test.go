package dist

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTimeoutErrorMessage(t *testing.T) {
	base := TimeoutError{Rank: 0, Op: "AllReduceSum", Seq: 21, Timeout: 5 * time.Second}
	with := func(peers ...PeerState) *TimeoutError {
		e := base
		e.Peers = peers
		return &e
	}
	for _, tc := range []struct {
		name    string
		err     *TimeoutError
		want    string
		missing []int
	}{
		{"behind", with(PeerState{Rank: 1, Answered: true, Entered: 20, Last: "AllReduceSum"}),
			"dist: rank 0: AllReduceSum #21 did not complete in 5s; rank(s) 1 did not arrive (rank 1 last entered AllReduceSum #20)", []int{1}},
		{"silent", with(PeerState{Rank: 1}),
			"dist: rank 0: AllReduceSum #21 did not complete in 5s; rank(s) 1 did not arrive (rank 1 did not answer: dead, frozen or exited)", []int{1}},
		{"some of three", with(
			PeerState{Rank: 1, Answered: true, Entered: 21, Last: "AllReduceSum", Op: "AllReduceSum"},
			PeerState{Rank: 2, Answered: true, Entered: 0},
			PeerState{Rank: 3}),
			"dist: rank 0: AllReduceSum #21 did not complete in 5s; rank(s) 2, 3 did not arrive (rank 2 has entered no collective; rank 3 did not answer: dead, frozen or exited)", []int{2, 3}},
		{"forgotten kind", with(PeerState{Rank: 1, Answered: true, Entered: 3}),
			"dist: rank 0: AllReduceSum #21 did not complete in 5s; rank(s) 1 did not arrive (rank 1 last entered collective #3)", []int{1}},
		{"mismatched", with(PeerState{Rank: 1, Answered: true, Entered: 21, Last: "Broadcast", Op: "Broadcast"}),
			"dist: rank 0: AllReduceSum #21 did not complete in 5s; every rank arrived at #21 but the ranks called different collectives (rank 1 entered Broadcast)", nil},
		{"ahead", with(PeerState{Rank: 1, Answered: true, Entered: 23, Last: "AllReduceSum", Op: "AllReduceSum"}),
			"dist: rank 0: AllReduceSum #21 did not complete in 5s; every rank arrived at it (it is stalled inside MPI)", nil},
		{"alone", with(), "dist: rank 0: AllReduceSum #21 did not complete in 5s", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error:\ngot  %s\nwant %s", got, tc.want)
			}
			if got := tc.err.Missing(); !reflect.DeepEqual(got, tc.missing) {
				t.Errorf("Missing: got %v, want %v", got, tc.missing)
			}
		})
	}
}

func TestDetectLaunch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string
		want   launch
		single bool
	}{
		{"plain", nil, launch{size: 1, rank: 0}, true},
		{"slurm batch shell", map[string]string{"SLURM_NTASKS": "4", "SLURM_PROCID": "0"}, launch{size: 1, rank: 0}, true},
		{"mpirun", map[string]string{"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "2"},
			launch{launched: true, by: "OMPI_COMM_WORLD_SIZE", size: 4, rank: 2}, false},
		{"mpirun -np 1", map[string]string{"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"},
			launch{launched: true, by: "OMPI_COMM_WORLD_SIZE", size: 1, rank: 0}, true},
		{"pmi", map[string]string{"PMI_SIZE": "8", "PMI_RANK": "7"}, launch{launched: true, by: "PMI_SIZE", size: 8, rank: 7}, false},
		{"pmix under srun", map[string]string{"PMIX_RANK": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "9"},
			launch{launched: true, by: "PMIX_RANK", size: 2, rank: 0}, false},
		{"pmix, size from SLURM_NTASKS", map[string]string{"PMIX_RANK": "3", "SLURM_NTASKS": "4"},
			launch{launched: true, by: "PMIX_RANK", size: 4, rank: 3}, false},
		{"pmix rank 0, size unknown", map[string]string{"PMIX_RANK": "0"}, launch{launched: true, by: "PMIX_RANK", size: -1, rank: 0}, true},
		{"pmix rank 1, size unknown", map[string]string{"PMIX_RANK": "1"}, launch{launched: true, by: "PMIX_RANK", size: -1, rank: 1}, false},
		{"garbage size", map[string]string{"OMPI_COMM_WORLD_SIZE": "x", "OMPI_COMM_WORLD_RANK": "1"},
			launch{launched: true, by: "OMPI_COMM_WORLD_SIZE", size: -1, rank: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := detectLaunch(func(k string) string { return tc.env[k] })
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.single() != tc.single {
				t.Errorf("single: got %v, want %v", got.single(), tc.single)
			}
			if !tc.single {
				if msg := got.errNoMPI().Error(); !strings.Contains(msg, "built without -tags mpi") || !strings.Contains(msg, tc.want.by) {
					t.Errorf("errNoMPI: got %q, want it to say the binary was built without -tags mpi and name %s", msg, tc.want.by)
				}
			}
		})
	}
}

func TestChunk(t *testing.T) {
	for _, tc := range []struct {
		n, max int
		want   [][2]int
	}{
		{0, 4, [][2]int{{0, 0}}},
		{3, 4, [][2]int{{0, 3}}},
		{4, 4, [][2]int{{0, 4}}},
		{9, 4, [][2]int{{0, 4}, {4, 8}, {8, 9}}},
		{chunkCount + 1, chunkCount, [][2]int{{0, chunkCount}, {chunkCount, chunkCount + 1}}},
	} {
		var got [][2]int
		for i, k := 0, 1; i < k; i++ {
			var lo, hi int
			lo, hi, k = chunk(tc.n, tc.max, i)
			got = append(got, [2]int{lo, hi})
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("chunks of %d by %d: got %v, want %v", tc.n, tc.max, got, tc.want)
		}
	}
}

func TestBlockLayout(t *testing.T) {
	buf := make([]byte, 3*8+8)
	large := buf[:24]
	for _, tc := range []struct {
		name         string
		large, small []byte
		rank         int // of 3
		want         layout
		err          string
	}{
		{"separate", large, make([]byte, 8), 1, disjoint, ""},
		{"adjacent after", large, buf[24:32], 1, disjoint, ""},
		{"in place rank 0", large, large[0:8], 0, inPlace, ""},
		{"in place rank 2", large, large[16:24], 2, inPlace, ""},
		{"empty", large[:0], large[:0], 0, disjoint, ""},
		{"another rank's block", large, large[8:16], 2, 0, "buffers overlap"},
		{"misaligned", large, large[4:12], 0, 0, "buffers overlap"},
		{"wrong size", large, make([]byte, 7), 0, 0, "want 3 ranks x 7 = 21 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := blockLayout("Op", tc.large, tc.small, 3, tc.rank)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got error %v, want one containing %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("got error %v, want none", err)
			case tc.err == "" && got != tc.want:
				t.Errorf("got layout %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOptionsTimeout(t *testing.T) {
	for _, tc := range []struct {
		in, want time.Duration
		err      bool
	}{
		{0, DefaultTimeout, false},
		{5 * time.Second, 5 * time.Second, false},
		{-time.Second, 0, true},
	} {
		got, err := Options{Timeout: tc.in}.timeout()
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("Options{Timeout: %v}.timeout(): got %v, %v, want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}
