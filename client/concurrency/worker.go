package concurrency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/backoff"
)

// Defaults of WorkerConfig fields left zero.
const (
	DefaultWorkerLease          = 30 * time.Second
	DefaultWorkerWait           = 10 * time.Second
	DefaultWorkerReleaseTimeout = 5 * time.Second
	maxWorkerWait               = 60 * time.Second // the server's cap on wait_ms
)

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Tenant, Queue and Owner are required. Owner is the name the claims
	// carry. Queue claims never take a live lease, but a ClaimTask of the
	// same task by the same owner does (and fences this worker): give each
	// agent process its own Owner.
	Tenant, Queue, Owner string
	// Lease is the lease asked for on every claim and renewal (default
	// DefaultWorkerLease), truncated to whole milliseconds as the API
	// counts them.
	Lease time.Duration
	// Statuses are the claimable statuses (the server's default: pending).
	Statuses []string
	// SetStatus, when not empty, is the status a claim sets.
	SetStatus string
	// Wait is how long one claim may wait on the server for a claimable
	// task (long poll), at most 60s. Zero means DefaultWorkerWait; a
	// negative Wait asks once, without waiting.
	Wait time.Duration
	// RenewEvery is the pause between renewals (default Lease/3).
	RenewEvery time.Duration
	// SafetyMargin is taken off the local lease deadline (default Lease/10):
	// the worker deems the lease lost at (send time of the last successful
	// claim or renewal) + Lease - SafetyMargin. RenewEvery must be shorter
	// than Lease - SafetyMargin.
	SafetyMargin time.Duration
	// ReleaseTimeout bounds the release after fn fails (default
	// DefaultWorkerReleaseTimeout).
	ReleaseTimeout time.Duration
	// OnError, when set, receives every error of a claimed task in Run: fn's
	// error, a lost lease, a failed release. Run itself goes on.
	OnError func(t *client.Task, err error)
	// NoPrefetch makes RunPool claim one task per slot and request, and
	// complete each in its own request, as Run does. By default RunPool
	// claims up to its free slots in one request
	// (client.ClaimQueueBatch) and sends the releases of its leases
	// (Complete, Release, Update with Release) from several slots in one
	// request with the claim of the tasks that take their slots
	// (client.QueueBatch): fewer round trips per task, each task still
	// with its own fencing token and lease. A task claimed for a slot
	// whose function has not returned yet is renewed while it waits; when
	// RunPool stops, the tasks claimed but not started are released
	// unstarted, which gives their attempts back (a server before
	// version 6, which does not know that, gets a plain release: each
	// then counts one attempt). Against a server before version 6, which
	// refuses batch claims, RunPool claims one task at a time, and the
	// Worker remembers it for its next BatchRetryClaims tasks claimed so,
	// then tries a batch claim again (the cluster may have been upgraded
	// meanwhile; a refusal starts the count over).
	NoPrefetch bool
}

// withDefaults fills zero fields.
func (c WorkerConfig) withDefaults() WorkerConfig {
	if c.Lease == 0 {
		c.Lease = DefaultWorkerLease
	}
	c.Lease = c.Lease.Truncate(time.Millisecond)
	if c.Wait == 0 {
		c.Wait = DefaultWorkerWait
	}
	if c.RenewEvery == 0 {
		c.RenewEvery = c.Lease / 3
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = c.Lease / 10
	}
	if c.ReleaseTimeout == 0 {
		c.ReleaseTimeout = DefaultWorkerReleaseTimeout
	}
	return c
}

// Validate reports the first problem with c, after defaults are applied.
func (c WorkerConfig) Validate() error {
	c = c.withDefaults()
	if err := required("tenant", c.Tenant, "queue", c.Queue, "owner", c.Owner); err != nil {
		return err
	}
	switch {
	case c.Lease < time.Millisecond:
		return fmt.Errorf("%w: worker lease must be at least 1ms, got %v", client.ErrInvalidArgument, c.Lease)
	case c.Wait > maxWorkerWait:
		return fmt.Errorf("%w: worker wait must be at most %v, got %v", client.ErrInvalidArgument, maxWorkerWait, c.Wait)
	case c.RenewEvery < 0 || c.SafetyMargin < 0 || c.ReleaseTimeout < 0:
		return fmt.Errorf("%w: worker renew interval, safety margin and release timeout must not be negative", client.ErrInvalidArgument)
	case c.RenewEvery >= c.Lease-c.SafetyMargin:
		return fmt.Errorf("%w: worker renew interval %v must be shorter than lease %v minus safety margin %v",
			client.ErrInvalidArgument, c.RenewEvery, c.Lease, c.SafetyMargin)
	}
	return nil
}

// WorkFunc is the agent's work on one claimed task. ctx is cancelled the
// moment the lease is known lost (context.Cause then matches ErrLeaseLost),
// the task is known to be cancelled (a renewal showed cancel_requested;
// context.Cause matches ErrCancelRequested: fn should stop, and the worker
// acknowledges the cancellation once fn returns, unless fn completed or
// released the task itself) or the caller's context ends. fn should finish with l.Complete or
// l.Release; when it returns nil without doing so, the task stays leased
// until the lease runs out (it is no longer renewed). When it returns an
// error, the worker fails the attempt (FailTask with the error's message;
// NonRetryable errors make the task dead at once): the server retries the
// task after its backoff, and makes it dead after its max_attempts. When
// it returns an error because the caller's context ended, the worker
// releases the task instead (the claim's attempt stays used), back in the
// first of Statuses (pending by default) when SetStatus is set.
type WorkFunc func(ctx context.Context, l *Lease) error

// Worker claims tasks from one queue and runs a WorkFunc on each, renewing
// the lease in the background. It is safe for concurrent use: several
// goroutines may call RunOnce or Run on one Worker, each holding its own
// lease.
type Worker struct {
	c   *client.Client
	cfg WorkerConfig
	// What the server was seen to refuse as unknown (before version 6):
	// batch claims (RunPool then claims one task at a time, for a while)
	// and unstarted releases (then sent plain).
	noBatch     batchFallback
	noUnstarted atomic.Bool
}

// BatchRetryClaims is how many tasks a Worker that saw a server refuse
// batch claims (before version 6: a leader not yet upgraded) claims one at
// a time before it tries a batch claim again. A count of tasks, not of
// requests or time: a Worker on a queue with work returns to batches soon
// after the cluster's upgrade, and an idle one has nothing to gain from
// them.
const BatchRetryClaims = 100

// batchFallback is whether a Worker claims (and releases) one task at a
// time because the server refused batches: set by a refusal, cleared after
// BatchRetryClaims single claims that got a task.
type batchFallback struct {
	on   atomic.Bool
	left atomic.Int64 // single claims until batches are tried again
}

// Load reports whether batches are off.
func (b *batchFallback) Load() bool { return b.on.Load() }

// refused records a refusal of a batch claim or of the batch route.
func (b *batchFallback) refused() {
	b.left.Store(BatchRetryClaims)
	b.on.Store(true)
}

// claimed counts a task claimed alone while batches are off.
func (b *batchFallback) claimed() {
	if b.on.Load() && b.left.Add(-1) <= 0 {
		b.on.Store(false)
	}
}

// NewWorker validates cfg and returns a Worker of c. It does no I/O.
func NewWorker(c *client.Client, cfg WorkerConfig) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Worker{c: c, cfg: cfg.withDefaults()}, nil
}

// RunOnce claims one task, waiting up to the configured Wait, runs fn on it
// and returns once fn has returned and the renewals have stopped. claimed
// is false when no task was claimed (err is then the claim's error, or nil
// when the queue had nothing). When a task was claimed, err is fn's error
// (joined with a failed release), or, when fn returned nil after the lease
// was lost, the loss.
func (w *Worker) RunOnce(ctx context.Context, fn WorkFunc) (claimed bool, err error) {
	_, claimed, err = w.runOnce(ctx, fn)
	return claimed, err
}

// Run claims and runs tasks one after another until ctx ends, and then
// returns ctx.Err(). Errors of claimed tasks go to WorkerConfig.OnError
// and do not stop Run. A claim that fails with client.ErrUnavailable is retried
// after a backoff (50ms doubling to 250ms); any other claim error (forbidden,
// not found, invalid argument) stops Run and is returned.
//
// When ctx ends while a claim is waiting on the server (a long poll), the
// server may have claimed a task for it whose answer nobody reads: that
// task stays leased to this Owner until the lease runs out, and the claim
// counts as one of its attempts. Stop workers with a Wait well below the
// Lease, or accept that a stop may delay one task by a lease.
func (w *Worker) Run(ctx context.Context, fn WorkFunc) error {
	var bo backoff.Backoff
	for ctx.Err() == nil {
		task, claimed, err := w.runOnce(ctx, fn)
		switch {
		case claimed:
			bo.Reset()
			if err != nil && w.cfg.OnError != nil {
				w.cfg.OnError(task, err)
			}
		case ctx.Err() != nil:
		case err == nil && w.cfg.Wait > 0:
			bo.Reset() // the server waited for us
		case err == nil || errors.Is(err, client.ErrUnavailable):
			_ = backoff.Sleep(ctx, bo.Delay(0, backoff.Cap))
		default:
			return err
		}
	}
	return ctx.Err()
}

func (w *Worker) runOnce(ctx context.Context, fn WorkFunc) (*client.Task, bool, error) {
	l, err := w.claim(ctx)
	if err != nil || l == nil {
		if l != nil {
			return l.Task(), true, err
		}
		return nil, false, err
	}
	return l.Task(), true, l.run(ctx, fn)
}

// claim asks for a task and returns its Lease, not yet renewing; nil when
// the queue had nothing. When the claim's round trip was longer than the
// renewal interval (a long poll that waited), the claim may have been
// applied anywhere in it, so the lease is renewed once at once: its send
// time then bounds the lease tightly. A lease that cannot be confirmed so is
// released and returned with the error.
func (w *Worker) claim(ctx context.Context) (*Lease, error) { return w.claimWait(ctx, w.cfg.Wait) }

// claimWait is claim with its own wait (a negative one asks once).
func (w *Worker) claimWait(ctx context.Context, wait time.Duration) (*Lease, error) {
	sent := time.Now()
	t, err := w.c.ClaimQueue(ownKeys(ctx), w.cfg.Tenant, w.cfg.Queue, w.claimRequest(wait))
	if err != nil || t == nil {
		return nil, err
	}
	l := newLease(w, t, sent)
	if err := w.confirm(ownKeys(ctx), l, sent); err != nil {
		return l, err
	}
	return l, nil
}

// claimRequest is the queue claim of the configuration, waiting up to
// wait (none when not positive).
func (w *Worker) claimRequest(wait time.Duration) client.QueueClaimRequest {
	req := client.QueueClaimRequest{Owner: w.cfg.Owner, Lease: w.cfg.Lease, Statuses: w.cfg.Statuses}
	if w.cfg.SetStatus != "" {
		req.SetStatus = &w.cfg.SetStatus
	}
	if wait > 0 {
		req.Wait = wait
	}
	return req
}

// ownKeys hides an Idempotency-Key attached to ctx with WithIdempotencyKey:
// the worker's own claims and renewals are distinct writes, each with its
// own key, and must never replay one another.
func ownKeys(ctx context.Context) context.Context {
	return client.WithIdempotencyKey(ctx, "")
}

// required returns client.ErrInvalidArgument for the first empty name, so
// that a bad configuration fails before anything is sent.
func required(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return fmt.Errorf("%w: %s is required", client.ErrInvalidArgument, pairs[i])
		}
	}
	return nil
}

// nonRetryable marks an error that retrying cannot fix.
type nonRetryable struct{ err error }

func (e *nonRetryable) Error() string { return e.err.Error() }
func (e *nonRetryable) Unwrap() error { return e.err }

// NonRetryable wraps err so that a Worker fails the task as non-retryable:
// it goes dead at once instead of being retried after a backoff. nil stays
// nil.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return &nonRetryable{err: err}
}

// IsNonRetryable reports whether err wraps a NonRetryable error.
func IsNonRetryable(err error) bool {
	var nr *nonRetryable
	return errors.As(err, &nr)
}

// RunPool runs fn on claimed tasks, at most n at once (n below 1 is 1),
// until ctx ends, and returns ctx.Err(), or the first claim error that
// stopped it (as Run's). By default it claims and completes in batches
// (WorkerConfig.NoPrefetch says how), one task at a time while the server
// is taken to refuse them (before version 6; BatchRetryClaims says for how
// long); with NoPrefetch it runs Run in n goroutines, the first error
// that stops one of them stopping the others too.
func (w *Worker) RunPool(ctx context.Context, n int, fn WorkFunc) error {
	n = max(n, 1)
	if !w.cfg.NoPrefetch {
		return w.runPrefetch(ctx, n, fn)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(pctx, fn); err != nil && pctx.Err() == nil {
				once.Do(func() { first = err })
				cancel()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
