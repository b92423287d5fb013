// Package nemesis looks for the next safety defect of the redlock library the way
// Jepsen does: it draws a fault schedule from a seed (Generate), runs it on real
// redis-server nodes with Clients in several worker processes (Run), records every
// operation's invocation and completion on CLOCK_MONOTONIC, and checks the merged
// history (Check) with porcupine against a lease-mutex model and a fenced-register
// model, plus the order of fencing tokens and the availability of free keys. A failing
// history is drawn twice (Render): porcupine's visualization and the safety package's
// timeline.
//
// It is a module of its own, so that porcupine never enters the library's go.mod.
// `make soak DURATION=60s` runs schedules for that long and prints their seeds; `make
// soak SEED=N FAMILY=name` replays one; `make mutants` (cmd/mutants) checks that known
// defects, applied to a copy of the tree, are caught. docs/safety.md describes the
// faults, the checks, the families and the figures.
//
// A program that calls Run must call RunWorkerIfAsked first thing (a test binary: in
// TestMain), since the worker processes are that program started again.
package nemesis
