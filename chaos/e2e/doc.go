// Package e2e holds Baton's black-box tests: real batond processes started
// by cmd/batond/cluster, spoken to only over HTTP and through the client SDK,
// killed with SIGKILL and paused with SIGSTOP. It has no non-test code.
package e2e
