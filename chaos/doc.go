// Package chaos is Baton's built-in chaos suite, in the manner of etcd's
// robustness tests and Jepsen: real batond processes (cmd/batond/cluster), faults
// injected into them (chaos/faults), concurrent simulated agents whose every
// operation is recorded (chaos/workload, chaos/history), and checkers that
// judge the recorded history (chaos/checker). chaos/runner strings one run
// together and repeats it; chaos/cmd/chaos is the command behind
// `make chaos`. See chaos/README.md for how to run it and what it checks.
//
// This package holds no code; it anchors the documentation.
package chaos
