// Package baton runs the benchmark suite's workloads against a Baton
// cluster of real batond processes (cmd/batond/cluster) through the Go client,
// the way agents use it: cas, queue, handoff, recovery, scale and soak (see
// docs/benchmarks.md for what each measures). Each workload returns a
// result.Run measured by bench/loadgen, the same code that measures the
// peers.
//
// Every workload works in the tenant Tenant with a principal holding every
// grant, and names its objects after its variant, so several workloads may
// share one cluster.
package baton
