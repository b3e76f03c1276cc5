// Package e2e holds Baton's black-box tests: real batond processes started
// by cmd/batond/cluster, spoken to only over HTTP and through the client SDK,
// killed with SIGKILL and paused with SIGSTOP. It has no non-test code.
//
// Every test starts clusters of its own, on ports no other test of the
// process is given (cluster.FreePorts). The long tests that assert no
// timing (only outcomes, each wait with a generous deadline) call
// t.Parallel, so that they overlap with each other after the rest have
// run. A test stays serial and runs alone when it measures how fast
// something happens (a failover, a rate), holds a lease or a grace period
// across several steps, or gives a member a short time to answer.
package e2e
