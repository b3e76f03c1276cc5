// Package fsm is Baton's deterministic replicated state machine.
//
// Contract:
//
//   - Apply is deterministic. Everything it decides on travels in the command:
//     the leader-stamped wall-clock time (Command.Now), the tenant, the
//     principal, generated ids and token hashes. Apply never reads a clock,
//     randomness, the environment or any file, and never depends on Go map
//     iteration order. Two replicas that applied the same log therefore hold
//     the same state, byte for byte, and report the same StateDigest.
//   - Application outcomes (fenced, version_mismatch, ...) are results, not
//     errors: a rejected compare-and-set is a committed decision too. Every
//     command either applies completely or, if its handler returns an error
//     code, leaves the state exactly as it was (the store records an undo
//     entry for each write of the command and replays them on failure).
//   - The state lives in an ordered in-memory key/value tree (Store). All
//     resources are records encoded with msgpack under keys described in
//     keys.go. The digest is an additive multiset hash over every (key, value)
//     pair, maintained on each write, so it costs O(1) to keep and to read.
//   - Snapshot only clones the tree (O(1), copy-on-write); Persist streams the
//     clone as zstd-compressed msgpack. Restore discards all prior state.
//   - Readers (the HTTP layer) call the read methods, which take a read lock;
//     Apply takes the write lock once per batch of log entries.
//
// FSM knows nothing of HTTP; the server package maps result codes to
// statuses.
package fsm
