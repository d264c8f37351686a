// Package mem owns every byte headroom holds: where it lives, who asked for
// it, and the limit it must stay under.
//
// Terms:
//   - Device: where memory lives ("cpu", "sim", "cuda:0"). A Device maps and
//     unmaps whole Regions; it knows nothing of tensors. CPU maps anonymous
//     private memory outside the Go heap (the garbage collector neither scans
//     nor owns it, and an unmapped region goes straight back to the OS).
//     NewSimulated is a device with a fixed capacity and no hardware: every
//     device-memory path (reservation, OOM, fit-to-budget) is tested on it.
//   - Region: one mapping from a Device, a multiple of PageSize long.
//   - Allocator: carves Buffers out of Regions (its chunks). It is a best-fit
//     allocator with coalescing in the style of TensorFlow's BFC allocator:
//     free blocks sit in size-class bins, a request takes the smallest free
//     block that holds it (splitting off the rest), and a freed block merges
//     with free neighbours at once. A chunk whose blocks are all free is
//     unmapped at once, so freed memory returns to the OS. Requests larger
//     than a chunk get a dedicated region.
//   - Buffer: a live allocation: Size() bytes, 64-byte aligned, with the
//     Category and owner it was charged to.
//   - Ledger: the account of live bytes by (Category, owner). Every Buffer is
//     charged to one before any memory is mapped for it. Ledgers nest (Sub):
//     the root sees every byte of the process.
//   - Budget: a ledger's hard limit on live bytes. A charge that would pass it
//     fails with *OOMError; ChargeWait instead waits for releases
//     (backpressure, as the input pipeline uses).
//   - Category: what a buffer is for (param, grad, optstate, activation,
//     workspace, input, io); every report uses these names.
//   - OOMError: the typed error of a refused request, from a budget or from a
//     device's capacity. It names the request, the limit, what is held and by
//     whom, and the largest free block; the planner adds remedies.
//   - Limit: the memory limit the process lives under (ProcessLimit: its
//     container's cgroup v2 memory.max or v1 memory.limit_in_bytes, else
//     the machine's available memory). LimitWatch follows a container's
//     limit while a run trains: its files opened once, each Read a few
//     preads into a buffer of its own (no allocation), giving the limit,
//     v2's memory.high, the cgroup's usage and page cache, this process's
//     anonymous memory, and where present OOM kills and PSI pressure.
//     Allocator.Trim gives the pages of free blocks back to the OS
//     (madvise MADV_DONTNEED) so a container sees a smaller plan at once.
//
// Accounting is exact: a request of n bytes charges exactly Align(n) bytes
// (a multiple of Alignment, 64), never a page-rounded or chunk-rounded
// amount, and the Buffer's Size is that same Align(n). The mapped bytes of a
// device may be larger (chunks, page rounding); they are reported by
// Allocator.Stats, not charged.
//
// In the life of a step: the compiler plans an arena and the persistent
// buffers (parameters, gradients, optimizer state) and sizes each with Align,
// so the plan's peak is a sum of aligned sizes. The runtime reserves the
// arena and the persistent buffers through an Allocator once, before the
// first step; that reservation is the only place a step can meet OOM. Steps
// then run inside the reservation and allocate nothing, so the ledger's
// measured Peak equals the plan's peak byte for byte. The input pipeline
// charges its buffers to a host sub-ledger with its own budget; at epoch ends
// the trainer compares ledger Snapshots and reports any Growth by owner.
//
// mem imports no other headroom package: call sites for reports come from the
// caller (AllocatorOptions.Site; package runtime sets it).
package mem
