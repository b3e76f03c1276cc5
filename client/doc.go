// Package client is the Go SDK for Baton, a Raft-replicated coordination
// store for multi-agent systems. It speaks the HTTP API of docs/api.md (version 1).
//
// A Client is built once and is safe for concurrent use. FromEnv reads
// the variables the CLI reads (BATON_ENDPOINTS, BATON_TOKEN, BATON_CACERT,
// BATON_CERT, BATON_KEY; what `batond local` prints); New takes a Config:
//
//	c, err := client.FromEnv()
//	c, err := client.New(client.Config{
//		Endpoints: []string{"https://10.0.0.1:7001", "https://10.0.0.2:7001"},
//		Token:     os.Getenv("BATON_TOKEN"),
//		CAFile:    "/etc/baton/tls/ca.pem",
//	})
//	task, err := c.ClaimQueue(ctx, "acme", "research", client.QueueClaimRequest{
//		Owner: "worker-1", Lease: 30 * time.Second,
//	})
//
// # Endpoints and failover
//
// Any node answers any request (followers forward to the leader), so the
// client only needs one live endpoint. When a follower forwarded an answer,
// it names the leader (X-Baton-Leader) and, if that is one of the
// configured endpoints, the client goes there directly from then on. A request goes first to the endpoint
// that last answered. On a connection error (refused, reset, EOF, or an
// attempt that exceeds Config.Timeout) or a 503 response, the client moves to
// the next endpoint at once; after every endpoint has failed in a round it
// backs off (50ms doubling up to 250ms, capped by the server's Retry-After,
// whose whole seconds are coarser than an election) and starts another round. Retrying
// stops when Config.MaxRetry has elapsed since the call began or ctx is done.
// Any other response, including every 4xx, is final and never retried.
//
// A 504 outcome_unknown (a write proposed whose outcome is not known) is
// retried the same way, but only by a write, which always carries an
// Idempotency-Key or session place, so it is not applied twice; it is
// final for any other call.
//
// A call that gives up on connection errors returns an error that matches
// ErrUnavailable and wraps the last transport error. A call stopped by ctx
// returns an error that matches ctx.Err() and wraps the last failure. When
// the call is a write and one of its attempts got no answer (a connection
// cut or timed out after the request went, an answer cut short), either
// error also matches ErrOutcomeUnknown: the write may have been applied.
//
// The At option pins one request to one endpoint, with a single attempt and
// no failover; ClusterAt, Healthz and Readyz use it to ask a specific node.
//
// # Idempotency
//
// Every POST, PUT and DELETE carries its place in the client's session
// (a session the client opens with the cluster, and the write's number in
// it), or, with Config.NoSession or against a server without sessions, an
// Idempotency-Key header: a random 128-bit hex key generated once per
// logical call. All of a call's retries carry the same place or key, so a
// retried write is applied at most once (the server answers a retry with
// the first response and Idempotent-Replay: true). To choose the key
// yourself, for example to carry one logical operation across process
// restarts, pass the IdempotencyKey option or attach it to the context with
// WithIdempotencyKey; the option wins when both are present.
//
// # Errors
//
// The server reports failures as {"error": {"code", "message", ...details}}.
// The client returns them as *Error, whose Is method matches the sentinel for
// its code, so both styles work:
//
//	if errors.Is(err, client.ErrFenced) { ... }
//	var e *client.Error
//	if errors.As(err, &e) { tok, _ := e.DetailUint("current_token") }
//
// Detail values are decoded with json.Number for numbers, so large fencing
// tokens keep their precision; use DetailUint, DetailString or OpIndex.
//
// # Coordination primitives
//
// Workers that claim tasks under a renewed lease, fenced locks and
// elections, and actions run at most once are in package
// github.com/baton-dev/baton/client/concurrency, built on this package's
// API alone (concurrency.NewWorker(c, cfg), concurrency.NewMutex,
// concurrency.NewElection, concurrency.Once).
//
// # Consistency and metadata
//
// Reads are linearizable by default; the Stale option lets the answering
// node serve from its local state. Every response carries the Raft index it
// reflects; CaptureMeta records it (and whether the answer was an idempotent
// replay) for any method, and Do returns it directly.
package client
