package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"
)

// Errors of a Lease. A lease that ended involuntarily reports an error that
// matches ErrLeaseLost and, beside it, the reason: ErrFenced (someone else
// claimed the task; the server's *Error is wrapped), ErrNotFound (the task
// was deleted) or ErrLeaseExpired (no renewal succeeded in time).
var (
	ErrLeaseLost     = errors.New("lease lost")     // the lease ended without this worker releasing it
	ErrLeaseExpired  = errors.New("lease expired")  // renewals failed until the local lease deadline passed
	ErrLeaseReleased = errors.New("lease released") // the lease was given back through Complete, Release or Update
	// ErrCancelRequested: the task was cancelled (CancelTask) while this
	// lease held it. The lease still holds until the worker acknowledges
	// (Lease.AckCancel), releases or fails the task, or it runs out.
	ErrCancelRequested = errors.New("task cancellation requested")
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
	OnError func(t *Task, err error)
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
		return fmt.Errorf("%w: worker lease must be at least 1ms, got %v", ErrInvalidArgument, c.Lease)
	case c.Wait > maxWorkerWait:
		return fmt.Errorf("%w: worker wait must be at most %v, got %v", ErrInvalidArgument, maxWorkerWait, c.Wait)
	case c.RenewEvery < 0 || c.SafetyMargin < 0 || c.ReleaseTimeout < 0:
		return fmt.Errorf("%w: worker renew interval, safety margin and release timeout must not be negative", ErrInvalidArgument)
	case c.RenewEvery >= c.Lease-c.SafetyMargin:
		return fmt.Errorf("%w: worker renew interval %v must be shorter than lease %v minus safety margin %v",
			ErrInvalidArgument, c.RenewEvery, c.Lease, c.SafetyMargin)
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
// releases the task instead, without using an attempt.
type WorkFunc func(ctx context.Context, l *Lease) error

// Worker claims tasks from one queue and runs a WorkFunc on each, renewing
// the lease in the background. It is safe for concurrent use: several
// goroutines may call RunOnce or Run on one Worker, each holding its own
// lease.
type Worker struct {
	c   *Client
	cfg WorkerConfig
}

// NewWorker validates cfg and returns a Worker. It does no I/O.
func (c *Client) NewWorker(cfg WorkerConfig) (*Worker, error) {
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
// and do not stop Run. A claim that fails with ErrUnavailable is retried
// after a backoff (50ms doubling to 1s); any other claim error (forbidden,
// not found, invalid argument) stops Run and is returned.
//
// When ctx ends while a claim is waiting on the server (a long poll), the
// server may have claimed a task for it whose answer nobody reads: that
// task stays leased to this Owner until the lease runs out, and the claim
// counts as one of its attempts. Stop workers with a Wait well below the
// Lease, or accept that a stop may delay one task by a lease.
func (w *Worker) Run(ctx context.Context, fn WorkFunc) error {
	bo := backoff{next: backoffStart}
	for ctx.Err() == nil {
		task, claimed, err := w.runOnce(ctx, fn)
		switch {
		case claimed:
			bo = backoff{next: backoffStart}
			if err != nil && w.cfg.OnError != nil {
				w.cfg.OnError(task, err)
			}
		case ctx.Err() != nil:
		case err == nil && w.cfg.Wait > 0:
			bo = backoff{next: backoffStart} // the server waited for us
		case err == nil || errors.Is(err, ErrUnavailable):
			_ = sleep(ctx, bo.delay(0, backoffCap))
		default:
			return err
		}
	}
	return ctx.Err()
}

func (w *Worker) runOnce(ctx context.Context, fn WorkFunc) (*Task, bool, error) {
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
	req := QueueClaimRequest{Owner: w.cfg.Owner, Lease: w.cfg.Lease, Statuses: w.cfg.Statuses}
	if w.cfg.SetStatus != "" {
		req.SetStatus = &w.cfg.SetStatus
	}
	if wait > 0 {
		req.Wait = wait
	}
	sent := time.Now()
	t, err := w.c.ClaimQueue(ownKeys(ctx), w.cfg.Tenant, w.cfg.Queue, req)
	if err != nil || t == nil {
		return nil, err
	}
	l := newLease(w, t, sent)
	if time.Since(sent) <= w.cfg.RenewEvery {
		return l, nil
	}
	rctx, cancel := context.WithTimeout(ownKeys(ctx), w.cfg.Lease-w.cfg.SafetyMargin)
	err = l.renew(rctx)
	cancel()
	if err != nil {
		if !errors.Is(l.Err(), ErrFenced) && !errors.Is(l.Err(), ErrNotFound) {
			// Past the local deadline, maybe not the server's: give the
			// task back (a stale token is refused, so this is harmless).
			_ = l.sendRelease(w.cfg.ReleaseTimeout)
		}
		return l, fmt.Errorf("confirm the lease of task %q after a slow claim: %w", t.TaskID, err)
	}
	return l, nil
}

// ownKeys hides an Idempotency-Key attached to ctx with WithIdempotencyKey:
// the worker's own claims and renewals are distinct writes, each with its
// own key, and must never replay one another.
func ownKeys(ctx context.Context) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, "")
}

// Lease is a worker's hold on one claimed task, valid while fn runs. Its
// guarded writes carry the claim's fencing token, and are refused locally,
// without a request, once the lease is known to have ended. A Lease is
// safe for concurrent use.
type Lease struct {
	w    *Worker
	task Task // as claimed

	cancel context.CancelCauseFunc // fn's context
	lost   chan struct{}           // closed when the lease is lost
	ended  chan struct{}           // closed when the lease ends: lost or released

	mu        sync.Mutex
	deadline  time.Time // local time before which the lease surely holds on the server
	err       error     // why the lease ended; nil while held
	releasing int       // releases in flight: a renewal refused meanwhile is not a loss
	cancelReq bool      // a renewal showed cancel_requested
}

func newLease(w *Worker, t *Task, sent time.Time) *Lease {
	l := &Lease{w: w, task: *t, lost: make(chan struct{}), ended: make(chan struct{})}
	l.deadline = sent.Add(w.cfg.Lease - w.cfg.SafetyMargin)
	return l
}

// Task returns a copy of the task as it was claimed.
func (l *Lease) Task() *Task {
	t := l.task
	return &t
}

// Token is the fencing token of the claim.
func (l *Lease) Token() uint64 { return l.task.FencingToken }

// Fence guards other writes (refs, KV, checkpoints, ops, transactions) with
// this lease's token. Send them through Guarded so that a fenced answer
// marks the lease lost.
func (l *Lease) Fence() Fence { return Fence{TaskID: l.task.TaskID, Token: l.task.FencingToken} }

// Deadline is the local time at which the worker will deem the lease lost
// unless a renewal succeeds before.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Lost is closed when the lease is lost (fenced, deleted or expired); not
// when it is released.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err is nil while the lease is held. Afterwards it tells why it ended: an
// error matching ErrLeaseLost (and ErrFenced, ErrNotFound or
// ErrLeaseExpired), or one matching ErrLeaseReleased.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkLocked()
}

// checkLocked returns why the lease ended, noticing a local deadline that
// passed before the renewer did. Called with l.mu held.
func (l *Lease) checkLocked() error {
	if l.err == nil && !time.Now().Before(l.deadline) && l.releasing == 0 {
		l.endLocked(expired(l.deadline, nil), true)
	}
	return l.err
}

// endLocked ends the lease with err, once. Called with l.mu held.
func (l *Lease) endLocked(err error, lost bool) {
	if l.err != nil {
		return
	}
	l.err = err
	close(l.ended)
	if lost {
		close(l.lost)
		if l.cancel != nil {
			l.cancel(err)
		}
	}
}

// expired is the cause of a lease that ran out locally. The last renewal
// error is kept as text only: it is often the renewal's own deadline, which
// must not read as the caller's context.DeadlineExceeded.
func expired(deadline time.Time, last error) error {
	if last != nil {
		return fmt.Errorf("%w: %w: no renewal succeeded by %s (last error: %v)", ErrLeaseLost, ErrLeaseExpired,
			deadline.Format(time.RFC3339Nano), last)
	}
	return fmt.Errorf("%w: %w: no renewal succeeded by %s", ErrLeaseLost, ErrLeaseExpired,
		deadline.Format(time.RFC3339Nano))
}

// observe marks the lease lost when err says the token is no longer
// current (fenced) or, with taskErr, that the task is gone.
func (l *Lease) observe(err error, taskErr bool) {
	if err == nil || !errors.Is(err, ErrFenced) && (!taskErr || !errors.Is(err, ErrNotFound)) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLocked(fmt.Errorf("%w: %w", ErrLeaseLost, err), true)
}

// Guarded runs write, which should carry fence (this lease's Fence), unless
// the lease is known to have ended: then it returns why, and write is never
// called. A write that fails with ErrFenced marks the lease lost.
func (l *Lease) Guarded(ctx context.Context, write func(ctx context.Context, fence Fence) error) error {
	if err := l.Err(); err != nil {
		return err
	}
	err := write(ctx, l.Fence())
	l.observe(err, false)
	return err
}

// Heartbeat renews the lease now, as the background renewer would, and
// moves Deadline: for a step that may take longer than the renewal
// interval, or to learn at once that the lease is gone (the error then
// matches ErrLeaseLost). With progress (not nil) it first records progress
// as the task's result under the lease's token, so that whoever claims the
// task after this lease is lost reads where this one got to in
// Task().Result; Complete replaces it with the final result.
func (l *Lease) Heartbeat(ctx context.Context, progress json.RawMessage) error {
	if err := l.Err(); err != nil {
		return err
	}
	if progress != nil {
		token := l.task.FencingToken
		_, err := l.w.c.UpdateTask(ctx, l.w.cfg.Tenant, l.task.TaskID,
			UpdateTaskRequest{FencingToken: &token, Result: progress})
		l.observe(err, true)
		if err != nil {
			return l.lostOr(fmt.Errorf("record progress of task %q: %w", l.task.TaskID, err))
		}
	}
	if err := l.renew(ctx); err != nil {
		return l.lostOr(fmt.Errorf("renew the lease of task %q: %w", l.task.TaskID, err))
	}
	if l.CancelRequested() {
		return l.cancelCause()
	}
	return nil
}

// CancelRequested reports whether a renewal (the background one or
// Heartbeat) showed that the task was cancelled while this lease held it.
func (l *Lease) CancelRequested() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cancelReq
}

func (l *Lease) cancelCause() error {
	return fmt.Errorf("%w: task %q", ErrCancelRequested, l.task.TaskID)
}

// AckCancel cancels the task under this lease's token, which ends the
// lease: the task is cancelled at once and the token retired (a requested
// cancellation is acknowledged so; without one, the holder cancels its own
// task).
func (l *Lease) AckCancel(ctx context.Context) (*Task, error) {
	if err := l.beginRelease(); err != nil {
		return nil, err
	}
	token := l.task.FencingToken
	t, err := l.w.c.CancelTask(ctx, l.w.cfg.Tenant, l.task.TaskID, CancelTaskRequest{FencingToken: &token})
	l.observe(err, true)
	l.endRelease(err)
	return t, err
}

// endCancelled ends a lease whose task was cancelled once fn returned
// (with fnErr): the cancellation is acknowledged, and the result matches
// ErrCancelRequested, unless fn gave the lease back itself (Complete,
// Release, Fail, Park: the server settled the cancellation then), when
// fn's own error is the result.
func (l *Lease) endCancelled(fnErr error) error {
	if lerr := l.Err(); errors.Is(lerr, ErrLeaseReleased) {
		return fnErr
	}
	err := l.cancelCause()
	if fnErr != nil && !errors.Is(fnErr, ErrCancelRequested) && !errors.Is(fnErr, context.Canceled) {
		err = fmt.Errorf("%w (the handler returned: %w)", err, fnErr)
	}
	if l.Err() != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.w.cfg.ReleaseTimeout)
	defer cancel()
	if _, aerr := l.AckCancel(ctx); aerr != nil && !errors.Is(aerr, ErrFenced) && !errors.Is(aerr, ErrLeaseLost) {
		err = errors.Join(err, fmt.Errorf("acknowledge the cancellation of task %q: %w", l.task.TaskID, aerr))
	}
	return err
}

// lostOr returns why the lease ended when it is known to have ended, else
// err: the caller of Heartbeat learns of a loss as ErrLeaseLost.
func (l *Lease) lostOr(err error) error {
	if lerr := l.Err(); lerr != nil {
		return lerr
	}
	return err
}

// Update changes the task under this lease's fencing token (which it sets,
// whatever req holds). With req.Release set it gives the lease back, as
// Release does.
func (l *Lease) Update(ctx context.Context, req UpdateTaskRequest) (*Task, error) {
	release := req.Release != nil && *req.Release
	if release {
		if err := l.beginRelease(); err != nil {
			return nil, err
		}
	} else if err := l.Err(); err != nil {
		return nil, err
	}
	token := l.task.FencingToken
	req.FencingToken = &token
	t, err := l.w.c.UpdateTask(ctx, l.w.cfg.Tenant, l.task.TaskID, req)
	l.observe(err, true)
	if release {
		l.endRelease(err)
	}
	return t, err
}

// Complete sets the task's status (unless status is empty) and result and
// releases the lease, in one fenced update.
func (l *Lease) Complete(ctx context.Context, status string, result json.RawMessage) (*Task, error) {
	req := UpdateTaskRequest{Result: result, Release: new(true)}
	if status != "" {
		req.Status = &status
	}
	return l.Update(ctx, req)
}

// Release gives the task back (clears owner and lease) without changing it.
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.Update(ctx, UpdateTaskRequest{Release: new(true)})
	return err
}

func (l *Lease) beginRelease() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return err
	}
	l.releasing++
	return nil
}

func (l *Lease) endRelease(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releasing--
	if err == nil {
		l.endLocked(fmt.Errorf("%w: task %q released under token %d", ErrLeaseReleased, l.task.TaskID, l.task.FencingToken), false)
	}
}

// release gives the task back, bounded by timeout, unless the lease ended.
func (l *Lease) release(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return l.Release(ctx)
}

// sendRelease sends a fenced release whatever the local state says.
func (l *Lease) sendRelease(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	token := l.task.FencingToken
	_, err := l.w.c.UpdateTask(ctx, l.w.cfg.Tenant, l.task.TaskID,
		UpdateTaskRequest{FencingToken: &token, Release: new(true)})
	return err
}

// renew extends the lease once and moves the local deadline.
func (l *Lease) renew(ctx context.Context) error {
	sent := time.Now()
	t, err := l.w.c.RenewTask(ctx, l.w.cfg.Tenant, l.task.TaskID,
		RenewRequest{FencingToken: l.task.FencingToken, Lease: l.w.cfg.Lease})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.releasing > 0 {
		return err // a release is in flight: it decides how the lease ends
	}
	if err == nil {
		if d := sent.Add(l.w.cfg.Lease - l.w.cfg.SafetyMargin); d.After(l.deadline) {
			l.deadline = d
		}
		if t != nil && t.CancelRequested && !l.cancelReq {
			l.cancelReq = true
			if l.cancel != nil {
				l.cancel(l.cancelCause())
			}
		}
		return nil
	}
	if errors.Is(err, ErrFenced) || errors.Is(err, ErrNotFound) {
		l.endLocked(fmt.Errorf("%w: %w", ErrLeaseLost, err), true)
	}
	return err
}

// run runs fn under the lease with the renewer beside it.
func (l *Lease) run(ctx context.Context, fn WorkFunc) error {
	fctx, cancel := context.WithCancelCause(ctx)
	l.mu.Lock()
	l.cancel = cancel
	if errors.Is(l.err, ErrLeaseLost) {
		cancel(l.err)
	} else if l.cancelReq {
		cancel(l.cancelCause())
	}
	l.mu.Unlock()
	stop := l.startRenewer()
	defer cancel(nil)
	defer stop() // also when fn panics
	err := fn(fctx, l)
	stop()
	if l.CancelRequested() {
		return l.endCancelled(err)
	}
	if err != nil {
		if ctx.Err() != nil {
			if rerr := l.releaseAfterFailure(); rerr != nil {
				err = errors.Join(err, fmt.Errorf("release task %q: %w", l.task.TaskID, rerr))
			}
			return err
		}
		if ferr := l.failAfterError(err); ferr != nil {
			err = errors.Join(err, fmt.Errorf("fail task %q: %w", l.task.TaskID, ferr))
		}
		return err
	}
	if lerr := l.Err(); errors.Is(lerr, ErrLeaseLost) {
		return lerr
	}
	return nil
}

// releaseAfterFailure gives back a lease still held after fn failed. A
// release refused as fenced means the lease was lost meanwhile: nothing to
// give back, and no error.
func (l *Lease) releaseAfterFailure() error {
	if l.Err() != nil {
		return nil
	}
	err := l.release(l.w.cfg.ReleaseTimeout)
	if errors.Is(err, ErrFenced) || errors.Is(err, ErrLeaseLost) {
		return nil
	}
	return err
}

// failAfterError ends a lease still held after fn failed with a failed
// attempt. A refusal as fenced means the lease was lost meanwhile: nothing
// to report.
func (l *Lease) failAfterError(cause error) error {
	if l.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.w.cfg.ReleaseTimeout)
	defer cancel()
	_, err := l.Fail(ctx, cause)
	if errors.Is(err, ErrFenced) || errors.Is(err, ErrLeaseLost) {
		return nil
	}
	return err
}

// Fail ends the attempt as failed with cause's message (at most 4,096
// bytes of it), non-retryable when cause wraps a NonRetryable error, and
// gives the lease back: the server retries the task after its backoff, or
// makes it dead (StatusDead) after its last attempt.
func (l *Lease) Fail(ctx context.Context, cause error) (*Task, error) {
	if err := l.beginRelease(); err != nil {
		return nil, err
	}
	req := FailTaskRequest{FencingToken: l.task.FencingToken, NonRetryable: IsNonRetryable(cause)}
	if cause != nil {
		req.Error = truncateUTF8(cause.Error(), maxFailError)
	}
	t, err := l.w.c.FailTask(ctx, l.w.cfg.Tenant, l.task.TaskID, req)
	l.observe(err, true)
	l.endRelease(err)
	return t, err
}

const maxFailError = 4096 // the server's limit on a failure's message

// truncateUTF8 cuts s to at most n bytes, not inside a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
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

// RunPool runs Run in n goroutines (at most n tasks at once; n below 1 is
// 1) until ctx ends, and returns ctx.Err(), or the first error that
// stopped one of them (the others are then stopped too).
func (w *Worker) RunPool(ctx context.Context, n int, fn WorkFunc) error {
	n = max(n, 1)
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

// startRenewer starts the renewal loop and returns a function that stops it
// and waits for it to exit; the function may be called more than once.
func (l *Lease) startRenewer() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.renewLoop(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// renewLoop renews every RenewEvery until ctx ends or the lease ends. A
// renewal that fails for a reason other than fencing is retried with a
// backoff until the local deadline; when that passes, the lease is lost as
// expired. Each renewal is bounded by the deadline too.
func (l *Lease) renewLoop(ctx context.Context) {
	next := time.Now().Add(l.w.cfg.RenewEvery)
	bo := backoff{next: backoffStart}
	var last error
	for {
		deadline := l.Deadline()
		if !waitUntil(ctx, l.ended, earlier(next, deadline)) {
			return
		}
		if !time.Now().Before(deadline) {
			if l.expire(deadline, last) {
				return
			}
			// A renewal moved the deadline, or a release is in flight and
			// decides: look again shortly.
			next = time.Now().Add(bo.delay(0, backoffCap))
			if !waitUntil(ctx, l.ended, next) {
				return
			}
			continue
		}
		if time.Now().Before(next) {
			continue // the deadline moved: a release in flight renewed nothing
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		err := l.renew(rctx)
		cancel()
		switch {
		case err == nil:
			last, bo = nil, backoff{next: backoffStart}
			next = sent.Add(l.w.cfg.RenewEvery)
		case ctx.Err() != nil:
			return
		default:
			last = err
			next = time.Now().Add(bo.delay(0, time.Until(deadline)))
		}
	}
}

// expire ends the lease as expired, and reports whether it has ended,
// unless a renewal moved the deadline or a release is in flight.
func (l *Lease) expire(deadline time.Time, last error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && (l.releasing > 0 || l.deadline.After(deadline)) {
		return false
	}
	l.endLocked(expired(deadline, last), true)
	return true
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// waitUntil waits until t and reports true, or false when ctx ends or
// ended closes first.
func waitUntil(ctx context.Context, ended <-chan struct{}, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ended:
		return false
	case <-ctx.Done():
		return false
	}
}
