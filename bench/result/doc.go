// Package result is the benchmark suite's result schema: what one workload
// run of one system measured, as JSON. The Baton driver (bench/cmd/bench)
// and the peers' program (bench/peers/cmd/peerbench, a module of its own)
// both write it, so every system's figures are computed by the same code
// (bench/loadgen) and merged into one report.
//
// Contracts:
//   - Latencies are of successful operations that started inside the
//     measured window (after the warm-up, before the end), in a Histogram
//     whose percentiles are within about 1.1% of the exact values.
//   - OpsPerSec counts those operations over the window's length.
//   - A Series counts completions by time since the run started (warm-up
//     included), in buckets of BucketMS.
//   - A soak's Memory holds one series per server process, sampled at
//     milliseconds since the run started (warm-up included); a byte count
//     of 0 is a sample that could not be read.
//   - The package imports only the standard library: the peers' module
//     depends on it and must not inherit Baton's dependencies.
package result
