// Package cluster runs a cluster of real batond processes on the loopback
// interface and puts each of them under the caller's control: start, clean
// stop (SIGTERM), crash (SIGKILL), pause (SIGSTOP), wipe, restart and rejoin.
//
// It serves four callers: `batond local` (a developer's cluster), black-box
// tests (chaos/e2e), the chaos suite and the benchmarks (bench/, and the
// separate module bench/peers for its port and GOMAXPROCS rules). It lives
// beside batond, not in chaos/, so that the production binary imports no
// test harness; fault injection through the nodes' failpoints is the chaos
// suite's own (chaos/faults). It talks to the nodes only through their
// processes and their HTTP endpoints (net/http and encoding/json), never
// through the client package's Client, so it can judge the server from
// outside; it borrows only the SDK's type for GET /v1/cluster.
//
// # Contracts
//
//   - Nodes are addressed by index i in [0, Nodes); node i has the Raft and
//     HTTP id "n<i+1>" (ID(i)). An index out of range is an error wrapping
//     ErrNoSuchNode.
//   - New only validates and builds: it does no I/O. Start picks free ports
//     (when the Config gives none), creates directories and launches every
//     node with --peers listing all of them; it returns once every node
//     serves GET /healthz, or with an error that names the node and carries
//     the tail of its log when one exits early. Ports never change after the
//     first Start, so restarted nodes keep their addresses; Start records
//     them in BaseDir/cluster.json and a later Cluster on the same data
//     must use the same ones (ErrLayout otherwise), since Raft knows its
//     peers by address.
//   - Node i keeps its Raft data in BaseDir/n<i+1>/data and its combined
//     stdout and stderr in BaseDir/n<i+1>/batond.log (appended across
//     restarts, each start preceded by a "=== cluster:" marker line).
//   - Every child is reaped: one goroutine per process waits for it and
//     closes that process's exit channel. Kill, Stop and Wipe return only
//     after the process has exited. Close (idempotent) stops every node and
//     must be called, typically from t.Cleanup; on Linux the children also
//     get SIGKILL if the harness process dies without calling it.
//   - An exit the harness did not ask for (a crash, a panic, a node that
//     shut itself down) is reported on Exits.
//   - Every wait (WaitLeader, WaitReady, WaitConverged, the health wait in
//     Start and Restart) polls every PollInterval until the context is done;
//     a context without a deadline gets DefaultWaitTimeout. Nothing here
//     synchronises by sleeping.
//   - The admin token reaches each node through BATON_ADMIN_TOKEN in its
//     environment, never on the command line.
//
// The package needs a Unix system (it sends SIGSTOP and SIGCONT) and is
// tested on Linux.
package cluster
