// Package promise is the promise test: it builds the headroom command once
// and runs it as a user would, as separate processes, to check the promise
// headroom makes before anything else, memory you can trust, on every
// model kind and every data path, not only on the runs each package's own
// tests happen to try.
//
// The promise, as the tests state it:
//
//   - Planned is measured. Every run prints its plan before step 1, and its
//     RESULT line's planned_peak_bytes equals its measured_peak_bytes, byte
//     for byte, whatever the model (mlp, cnn, resnet, unet, gpt, lstm, a
//     functional Keras config), the data (built-in in memory or streamed,
//     a CSV, NPY arrays, a folder of images with or without augmentation,
//     text) and the flags (--accumulate, --remat, both 16-bit policies,
//     --fit-to-budget, --validation-split). Augmentation buffers are part of
//     the plan too.
//   - A container is never overrun. In a memory cgroup at half of what a run
//     needs (its planned peak plus 32 MiB for the process itself), with no
//     --budget flag, headroom reads the cgroup's limit and either refuses
//     before step 1 (status 1, a message naming the memory limit and a
//     remedy, nothing of the data set loaded: the cgroup's peak stays under
//     64 MiB) or streams a built-in data set that is too big and trains
//     within the limit; with --fit-to-budget it trains within the limit. It
//     is never killed (status 137, an OOM kill in the cgroup).
//   - A stop loses nothing. SIGTERM exits 143, SIGINT 130, each after
//     writing a checkpoint it names; --resume then ends where the
//     uninterrupted run ends, bit for bit (the same final_loss and val_loss
//     strings).
//   - Files are the user's. --csv pointed at a file that is not a headroom
//     CSV log is refused before step 1, and the file is left byte for byte.
//   - Every run reports its speed: samples_per_sec > 0, runs shorter than the
//     warm-up and runs on --data included.
//
// Why a package of its own: the promise is about the process a user runs
// (its exit status, its output, the memory the kernel sees), so it is
// checked on the built binary, in real cgroups and with real signals, not
// through cli.Main in the test's own process. TestMain builds the command
// once; each test runs it with a timeout and reads what a user would read.
// The sampled combinations are a fixed table, printed by
// TestSampledCombinations; TestSampleCovers checks that it covers every
// model kind, data path and flag.
//
// The package holds only tests. It needs Linux memory cgroups (root) for
// the container test (testutil.NewMemoryCgroup skips where none can be
// made) and Fashion-MNIST in /usr/share/datasets/fashion-mnist (Debian's
// dataset-fashion-mnist) for the container and streamed runs; a missing
// Fashion-MNIST is a failure, not a skip.
package promise
