// Package dist is headroom's communication layer for data-parallel training:
// a small communicator interface over a fixed set of processes, with an
// implementation over Open MPI (build tag mpi) and a no-op one for a single
// process.
//
// Terms:
//   - Rank, Size: the processes of a job are numbered 0 ... Size-1; Rank is
//     this process's number. Rank 0 prints, checkpoints and is the usual root.
//   - Collective: an operation every rank calls, in the same order, with
//     matching arguments (AllReduceSum, ReduceScatterSum, AllGather,
//     Broadcast, Barrier). The n-th collective of one rank meets the n-th of
//     every other rank; collectives are numbered from 1 in that order
//     ("AllReduceSum #17"). Calls from several goroutines must be ordered by
//     the caller so that every rank issues them in the same order.
//   - Buffer: a []byte holding float32 or float64 elements (per a
//     tensor.DType) in host byte order, usually a view into a planned arena.
//     Reductions are element-wise sums; averaging is the caller's (divide by
//     Size).
//   - Block: ReduceScatterSum and AllGather split the large buffer into Size
//     equal blocks, block r belonging to rank r. Either may run in place
//     when the small buffer is exactly this rank's block of the large one
//     (recv == send[r*n:(r+1)*n] for ReduceScatterSum, send ==
//     recv[r*n:(r+1)*n] for AllGather), the layout ZeRO-1 uses; the other
//     blocks of an in-place ReduceScatterSum's send buffer are clobbered.
//   - Request: a started, non-blocking collective (Start: an all-reduce;
//     StartReduceScatter, StartAllGather); Wait completes it. Its buffers
//     must not be read or written in between, and Wait must be called
//     exactly once (the Request is recycled afterwards, like an MPI request
//     handle). Start is how gradient buckets overlap backward;
//     StartReduceScatter how ZeRO-2 and ZeRO-3 reduce gradient buckets to
//     shards while backward goes on, StartAllGather how ZeRO-3 prefetches a
//     layer's parameters while the layer before it computes.
//   - Timeout: Options.Timeout (60 s by default) bounds every collective,
//     counted from when this rank enters it. A collective that has not
//     completed by then means a rank is dead, frozen or hung, or the ranks
//     called different collectives: the communicator asks every other rank
//     which collective it last entered, prints a *TimeoutError naming the
//     ranks that did not arrive, and aborts the whole job through the
//     launcher (MPI_Abort). It must exceed the longest time one rank may run
//     ahead of another, such as rank 0 writing a checkpoint while the others
//     wait in the next collective.
//
// Implementations: Single() is the single-process communicator (Rank 0,
// Size 1): reductions leave buffers as they are and gathers copy. Open
// returns it when the process was not started by a launcher. Built with
// -tags mpi (cgo against Open MPI 4.1, Debian's libopenmpi-dev), Open
// returns an MPI communicator over MPI_COMM_WORLD when the environment shows
// mpirun, srun or another PMI/PMIx launcher. The default build has no cgo and
// refuses to run as one of several launched processes. mpi.go (build tag mpi)
// documents how MPI calls are confined to one dedicated, locked OS thread.
//
// A lost rank: under mpirun, a rank that dies makes mpirun kill the others
// at once (Open MPI 4.1's default), and mpirun's own message names the rank
// ("mpirun noticed that process rank 1 ... exited on signal 9"). Where the
// launcher does not end the job, or the rank is alive but stuck, the timeout
// above ends it with dist's message instead. Either way no rank waits
// forever and the job exits non-zero.
//
// In the life of a step: the trainer opens one Comm at start-up; rank 0's
// initial weights are broadcast; each rank reads its shard of the data
// (Shard(Size, Rank)); during backward each gradient bucket's all-reduce is
// started as soon as the bucket is complete and waited for before the
// update (each rank's gradient is weighted by its share of the batch);
// with a sharded optimizer
// (ZeRO-1) gradients are reduce-scattered, each rank updates its block of
// the parameters and the parameters are all-gathered. Only rank 0 writes
// checkpoints. docs/distributed.md shows how to launch a job.
package dist
