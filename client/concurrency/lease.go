package concurrency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/backoff"
)

// Errors of a Lease. A lease that ended involuntarily reports an error that
// matches ErrLeaseLost and, beside it, the reason: client.ErrFenced (someone else
// claimed the task; the server's *client.Error is wrapped), client.ErrNotFound (the task
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

// Lease is a worker's hold on one claimed task, valid while fn runs. Its
// guarded writes carry the claim's fencing token, and are refused locally,
// without a request, once the lease is known to have ended. A Lease is
// safe for concurrent use.
type Lease struct {
	w    *Worker
	task client.Task // as claimed

	cancel context.CancelCauseFunc // fn's context
	lost   chan struct{}           // closed when the lease is lost
	ended  chan struct{}           // closed when the lease ends: lost or released

	mu        sync.Mutex
	deadline  time.Time // local time before which the lease surely holds on the server
	err       error     // why the lease ended; nil while held
	releasing int       // releases in flight: a renewal refused meanwhile is not a loss
	cancelReq bool      // a renewal showed cancel_requested

	// With batch claims (pool.go, RunPool's default): the pool whose
	// batches carry this lease's releases, whether one is queued (under
	// pool.mu), and the renewal started when the pool claimed the task.
	pool      *pool
	finishing bool
	sending   bool // a release of this lease is in a batch in flight (under pool.mu)
	renewing  func()
}

func newLease(w *Worker, t *client.Task, sent time.Time) *Lease {
	l := &Lease{w: w, task: *t, lost: make(chan struct{}), ended: make(chan struct{})}
	l.deadline = sent.Add(w.cfg.Lease - w.cfg.SafetyMargin)
	return l
}

// Task returns a copy of the task as it was claimed.
func (l *Lease) Task() *client.Task {
	t := l.task
	return &t
}

// Token is the fencing token of the claim.
func (l *Lease) Token() uint64 { return l.task.FencingToken }

// Fence guards other writes (refs, KV, checkpoints, ops, transactions) with
// this lease's token. Send them through Guarded so that a fenced answer
// marks the lease lost.
func (l *Lease) Fence() client.Fence {
	return client.Fence{TaskID: l.task.TaskID, Token: l.task.FencingToken}
}

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
// error matching ErrLeaseLost (and client.ErrFenced, client.ErrNotFound or
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
	if err == nil || !errors.Is(err, client.ErrFenced) && (!taskErr || !errors.Is(err, client.ErrNotFound)) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLocked(fmt.Errorf("%w: %w", ErrLeaseLost, err), true)
}

// Guarded runs write, which should carry fence (this lease's Fence), unless
// the lease is known to have ended: then it returns why, and write is never
// called. A write that fails with client.ErrFenced marks the lease lost.
func (l *Lease) Guarded(ctx context.Context, write func(ctx context.Context, fence client.Fence) error) error {
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
		_, err := l.w.c.UpdateTask(ownKeys(ctx), l.w.cfg.Tenant, l.task.TaskID,
			client.UpdateTaskRequest{FencingToken: &token, Result: progress})
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
func (l *Lease) AckCancel(ctx context.Context) (*client.Task, error) {
	if err := l.beginRelease(); err != nil {
		return nil, err
	}
	token := l.task.FencingToken
	t, err := l.w.c.CancelTask(ctx, l.w.cfg.Tenant, l.task.TaskID, client.CancelTaskRequest{FencingToken: &token})
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
	if _, aerr := l.AckCancel(ctx); aerr != nil && !errors.Is(aerr, client.ErrFenced) && !errors.Is(aerr, ErrLeaseLost) {
		err = errors.Join(err, fmt.Errorf("acknowledge the cancellation of task %q: %w", l.task.TaskID, aerr))
	}
	return err
}

// Park parks the task on a waitpoint under this lease's token, which ends
// the lease (as Release does): the task is claimable again once the
// waitpoint is completed or times out.
func (l *Lease) Park(ctx context.Context, waitpointID string) (*client.Task, error) {
	if err := l.beginRelease(); err != nil {
		return nil, err
	}
	t, err := l.w.c.ParkTask(ctx, l.w.cfg.Tenant, l.task.TaskID, l.task.FencingToken, waitpointID)
	l.observe(err, true)
	l.endRelease(err)
	return t, err
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
func (l *Lease) Update(ctx context.Context, req client.UpdateTaskRequest) (*client.Task, error) {
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
	var t *client.Task
	var err error
	if release && l.pool != nil {
		t, err = l.pool.finish(ctx, l, req) // with other releases and the next claims
	} else {
		t, err = l.w.c.UpdateTask(ctx, l.w.cfg.Tenant, l.task.TaskID, req)
	}
	l.observe(err, true)
	if release {
		l.endRelease(err)
	}
	return t, err
}

// Complete sets the task's status (unless status is empty) and result and
// releases the lease, in one fenced update.
func (l *Lease) Complete(ctx context.Context, status string, result json.RawMessage) (*client.Task, error) {
	req := client.UpdateTaskRequest{Result: result, Release: new(true)}
	if status != "" {
		req.Status = &status
	}
	return l.Update(ctx, req)
}

// Release gives the task back (clears owner and lease) without changing it.
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.Update(ctx, client.UpdateTaskRequest{Release: new(true)})
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

// releaseUnstarted gives back a task claimed and never started, bounded
// by timeout, unless the lease ended, with its attempt (sendRelease).
func (l *Lease) releaseUnstarted(timeout time.Duration) error {
	if err := l.beginRelease(); err != nil {
		return err
	}
	err := l.sendRelease(timeout)
	l.observe(err, true)
	l.endRelease(err)
	return err
}

// sendRelease sends a fenced release of a task never started, whatever
// the local state says: with Unstarted, which gives back the claim's
// attempt (and the status its set_status replaced), so that a claim
// nobody acted on does not count. A server before version 6 refuses the
// field as unknown: the release is then sent plain, and the Worker
// remembers not to send it again.
func (l *Lease) sendRelease(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ownKeys(context.Background()), timeout)
	defer cancel()
	token := l.task.FencingToken
	req := client.UpdateTaskRequest{FencingToken: &token, Release: new(true), Unstarted: !l.w.noUnstarted.Load()}
	_, err := l.w.c.UpdateTask(ctx, l.w.cfg.Tenant, l.task.TaskID, req)
	if req.Unstarted && unknownField(err, "unstarted") {
		l.w.noUnstarted.Store(true)
		req.Unstarted = false
		_, err = l.w.c.UpdateTask(ctx, l.w.cfg.Tenant, l.task.TaskID, req)
	}
	return err
}

// renew extends the lease once and moves the local deadline.
func (l *Lease) renew(ctx context.Context) error {
	sent := time.Now()
	// Every renewal is a write of its own: a key the caller's context
	// carries would make the next ones replays of the first.
	t, err := l.w.c.RenewTask(ownKeys(ctx), l.w.cfg.Tenant, l.task.TaskID,
		client.RenewRequest{FencingToken: l.task.FencingToken, Lease: l.w.cfg.Lease})
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
	if errors.Is(err, client.ErrFenced) || errors.Is(err, client.ErrNotFound) {
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
	stop := l.renewing // started when a prefetching pool claimed the task
	if stop == nil {
		stop = l.startRenewer()
	}
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

// releaseAfterFailure gives back a lease still held after fn failed
// because the caller's context ended. With SetStatus, the task is put back
// in the first claimable status (Statuses, else pending): released in the
// status its claim set, no claim of the queue would find it again. A
// release refused as fenced means the lease was lost meanwhile: nothing to
// give back, and no error.
func (l *Lease) releaseAfterFailure() error {
	if l.Err() != nil {
		return nil
	}
	req := client.UpdateTaskRequest{Release: new(true)}
	if l.w.cfg.SetStatus != "" {
		back := "pending" // the server's default claimable status
		if len(l.w.cfg.Statuses) > 0 {
			back = l.w.cfg.Statuses[0]
		}
		req.Status = &back
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.w.cfg.ReleaseTimeout)
	defer cancel()
	_, err := l.Update(ctx, req)
	if errors.Is(err, client.ErrFenced) || errors.Is(err, ErrLeaseLost) {
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
	if errors.Is(err, client.ErrFenced) || errors.Is(err, ErrLeaseLost) {
		return nil
	}
	return err
}

// Fail ends the attempt as failed with cause's message (at most 4,096
// bytes of it), non-retryable when cause wraps a NonRetryable error, and
// gives the lease back: the server retries the task after its backoff, or
// makes it dead (StatusDead) after its last attempt.
func (l *Lease) Fail(ctx context.Context, cause error) (*client.Task, error) {
	if err := l.beginRelease(); err != nil {
		return nil, err
	}
	req := client.FailTaskRequest{FencingToken: l.task.FencingToken, NonRetryable: IsNonRetryable(cause)}
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
	var bo backoff.Backoff
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
			next = time.Now().Add(bo.Delay(0, backoff.Cap))
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
			last = nil
			bo.Reset()
			next = sent.Add(l.w.cfg.RenewEvery)
		case ctx.Err() != nil:
			return
		default:
			last = err
			next = time.Now().Add(bo.Delay(0, time.Until(deadline)))
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
