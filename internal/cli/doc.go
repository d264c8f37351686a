// Package cli implements the headroom command's subcommands as wiring:
// flags, a configuration, one call into the library and printing. train
// and plan turn their flags into a train.Data (the user's files, a
// built-in data set or text, which train decides to load or stream) and a
// train.Config, and call train.New and Fit, or PlanFor; evaluate and
// predict run a model file through train.Predictor, generate through
// train.Generator, export writes one with export/onnx. No training logic
// lives here (internal/layout's test holds every file to 300 lines and
// every function to 60). One function formats every RESULT line
// (resultLine), and one table maps errors to exit statuses (exitStatus):
// 0 done, 1 an error, 2 a usage error, 128+N stopped by signal N after a
// checkpoint. cmd/headroom only calls Main; help goes to stdout.
//
// Every failure reaches the user as one line on stderr and a non-zero exit
// status; a panic (a bug) is reported the same way, without a trace.
package cli
