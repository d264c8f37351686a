// Package cli implements the headroom command's subcommands (train, plan):
// it parses flags, loads a data set, builds a model, and hands them to
// package train; it prints the memory plan, progress and the RESULT line.
// cmd/headroom only calls Main.
//
// Every failure reaches the user as one line on stderr and a non-zero exit
// status; a panic (a bug) is reported the same way, without a trace.
package cli
