package concurrency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/backoff"
)

// pool is RunPool with batch claiming (the default): n slots fed by batch claims
// (client.ClaimQueueBatch: up to the free slots in one request), and the
// releasing updates of the slots' leases (Complete, Release, Update with
// Release) sent together, with a claim of the tasks that take their slots
// (client.QueueBatch): one round trip for several finishes and the next
// claims, each task still with its own fencing token and lease.
//
// It holds at most n tasks beside the ones whose release is in a batch:
// a task claimed for a finishing slot waits for that slot's function to
// return, and its lease is renewed from the moment it is claimed, so a
// task held but not started is never lost to its lease running out. When
// ctx ends the pool claims nothing more, sends the releases still queued,
// waits for the running functions and gives back the tasks it holds but
// did not start (released unstarted, with their attempts, not left to
// their leases).
//
// A server before version 6 refuses the batch claim (max is an unknown
// field) and has no batch route: once it has seen either (Worker.noBatch)
// the pool claims one task at a time, only for idle slots, and sends
// each release alone, as Run does; its running functions go on. After
// BatchRetryClaims tasks claimed so it tries batches again.
type pool struct {
	w     *Worker
	fn    WorkFunc
	n     int
	ctx   context.Context
	ready chan *Lease // claimed, not started

	mu        sync.Mutex
	held      int           // tasks held (running or ready) and claims in flight, by their max
	finishing int           // held tasks whose release is queued or sent
	pending   []*poolFinish // releases for the next batch
	wakeClaim chan struct{} // capacity 1: the state changed, for claimLoop
	wakeFlush chan struct{} // capacity 1: likewise, for flushLoop
	flushes   int           // batches in flight (at most maxFlushes)
	batchOK   bool          // the last batch came back from the batch route
	stopErr   error         // the claim error that stops the pool
	stop      context.CancelFunc
}

// poolFinish is a lease's releasing update waiting for its batch.
type poolFinish struct {
	l    *Lease
	req  client.UpdateTaskRequest
	done chan poolOutcome // capacity 1
}

type poolOutcome struct {
	task *client.Task
	err  error
}

func (w *Worker) runPrefetch(ctx context.Context, n int, fn WorkFunc) error {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	p := &pool{w: w, fn: fn, n: n, ctx: pctx, stop: stop, ready: make(chan *Lease, 2*n+MaxBatch),
		wakeClaim: make(chan struct{}, 1), wakeFlush: make(chan struct{}, 1)}
	var slots, loops sync.WaitGroup
	for range n {
		slots.Add(1)
		go func() {
			defer slots.Done()
			p.slot()
		}()
	}
	loops.Add(2)
	go func() {
		defer loops.Done()
		p.claimLoop()
	}()
	go func() {
		defer loops.Done()
		p.flushLoop(&slots)
	}()
	loops.Wait()
	// Nothing claims any more and every slot has returned: give back the
	// tasks claimed but not started.
	close(p.ready)
	for l := range p.ready {
		l.stopRenewer()
		l.pool = nil // released on its own: nothing flushes any more
		if l.Err() == nil {
			_ = l.releaseUnstarted(w.cfg.ReleaseTimeout)
		}
	}
	if p.stopErr != nil {
		return p.stopErr
	}
	return ctx.Err()
}

// MaxBatch is the most tasks a prefetching Worker claims, and the most
// releases it sends, in one request (client.MaxClaimBatch).
const MaxBatch = client.MaxClaimBatch

func (p *pool) kick() {
	for _, c := range []chan struct{}{p.wakeClaim, p.wakeFlush} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// slot runs the ready tasks one at a time until ctx ends.
func (p *pool) slot() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case l := <-p.ready:
			if p.ctx.Err() != nil {
				p.ready <- l // given back after the slots return
				return
			}
			err := l.run(p.ctx, p.fn)
			if err != nil && p.w.cfg.OnError != nil {
				p.w.cfg.OnError(l.Task(), err)
			}
			p.mu.Lock()
			p.held--
			if l.finishing {
				p.finishing--
			}
			p.mu.Unlock()
			p.kick()
		}
	}
}

// free is how many more tasks the pool may claim for idle slots (and
// finishing ones, with batch claims). Called with p.mu held.
func (p *pool) free() int {
	if p.w.noBatch.Load() {
		return min(p.n-p.held, 1) // single claims, for idle slots only
	}
	return min(p.n-p.held+p.finishing, MaxBatch)
}

// claimLoop claims up to the free slots whenever some are free and no
// batch of releases is about to claim for them, waiting on the server
// (WorkerConfig.Wait) when the queue is empty. Its errors are Run's.
func (p *pool) claimLoop() {
	var bo backoff.Backoff
	for p.ctx.Err() == nil {
		p.mu.Lock()
		max := p.free()
		if (len(p.pending) > 0 || p.flushes > 0) && !p.w.noBatch.Load() {
			max = 0 // the batch claims for them
		}
		if max > 0 {
			p.held += max
		}
		p.mu.Unlock()
		if max <= 0 {
			select {
			case <-p.wakeClaim:
			case <-p.ctx.Done():
			}
			continue
		}
		got, err := p.claim(max)
		p.mu.Lock()
		p.held -= max - got
		p.mu.Unlock()
		switch {
		case p.ctx.Err() != nil:
		case got > 0:
			bo.Reset()
		case err == nil && p.w.cfg.Wait > 0:
			bo.Reset() // the server waited for us
		case err == nil || errors.Is(err, client.ErrUnavailable):
			_ = backoff.Sleep(p.ctx, bo.Delay(0, backoff.Cap))
		case unknownField(err, "max"):
			p.w.noBatch.refused() // a server before version 6: single claims for a while
			p.mu.Lock()
			p.batchOK = false // one batch first when batches are tried again
			p.mu.Unlock()
		default:
			p.mu.Lock()
			p.stopErr = err
			p.mu.Unlock()
			p.stop()
		}
	}
	p.kick()
}

// claim claims up to max tasks (one, once the server was seen to refuse
// batch claims), waiting up to WorkerConfig.Wait, and hands them to the
// slots; it returns how many it holds now.
func (p *pool) claim(max int) (int, error) {
	req := p.w.claimRequest(p.w.cfg.Wait)
	sent := time.Now()
	if p.w.noBatch.Load() {
		t, err := p.w.c.ClaimQueue(ownKeys(p.ctx), p.w.cfg.Tenant, p.w.cfg.Queue, req)
		if err != nil || t == nil {
			return 0, err
		}
		p.w.noBatch.claimed()
		return p.hold([]*client.Task{t}, sent), nil
	}
	ts, err := p.w.c.ClaimQueueBatch(ownKeys(p.ctx), p.w.cfg.Tenant, p.w.cfg.Queue, req, max)
	if err != nil {
		return 0, err
	}
	return p.hold(ts, sent), nil
}

// hold starts the renewal of each claimed task and makes it ready. A
// claim whose round trip was longer than the renewal interval is
// confirmed first (Worker.confirm); a task whose lease cannot be is
// given back and reported.
func (p *pool) hold(ts []*client.Task, sent time.Time) int {
	held := 0
	for _, t := range ts {
		l := newLease(p.w, t, sent)
		l.pool = p
		if err := p.w.confirm(ownKeys(context.Background()), l, sent); err != nil {
			if p.w.cfg.OnError != nil {
				p.w.cfg.OnError(l.Task(), err)
			}
			continue
		}
		l.renewing = l.startRenewer()
		p.ready <- l
		held++
	}
	p.mu.Lock()
	p.held -= len(ts) - held
	p.mu.Unlock()
	return held
}

// finish queues a releasing update of l for the next batch and waits for
// its own outcome. When ctx ends first, an update still queued is
// withdrawn: it is not sent, as a request on a context that ended. (Before,
// it was still sent after finish had returned ctx's error, so a Complete
// the caller was told had failed was applied, and then undone by the
// release Run sends after a failure.) One already in a batch on its way
// may apply: its caller's later writes of the lease go after it.
func (p *pool) finish(ctx context.Context, l *Lease, req client.UpdateTaskRequest) (*client.Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // as a request on a context that ended: not sent
	}
	f := &poolFinish{l: l, req: req, done: make(chan poolOutcome, 1)}
	p.mu.Lock()
	p.pending = append(p.pending, f)
	if !l.finishing {
		l.finishing = true
		p.finishing++
	}
	p.mu.Unlock()
	p.kick()
	select {
	case o := <-f.done:
		return o.task, o.err
	case <-ctx.Done():
	}
	p.mu.Lock()
	i := slices.Index(p.pending, f)
	if i >= 0 {
		p.pending = slices.Delete(p.pending, i, i+1)
		if !l.sending && !slices.ContainsFunc(p.pending, func(o *poolFinish) bool { return o.l == l }) {
			l.finishing = false // its slot is not about to be free after all
			p.finishing--
		}
	}
	p.mu.Unlock()
	if i >= 0 {
		p.kick()
	}
	return nil, ctx.Err()
}

// maxFlushes is how many batches a pool has in flight at once. With one,
// the slots that finish while a batch is out wait for its whole round
// trip before theirs is sent; a second overlaps the two (docs/benchmarks.md,
// "Two batches in flight"). Only one is, until a batch has come back from
// the batch route: a server before version 6 then refuses one batch, not
// two. A lease's release waits for the batch holding its previous one (a
// Complete in a batch on its way when its caller gave up), so that the
// releases of one lease reach the server in the order they were made.
const maxFlushes = 2

// flushLoop sends the queued releases, up to MaxBatch at a time and up to
// maxFlushes batches at once, with a claim of the slots they and the idle
// slots free (none once ctx ended), until ctx ends, every slot has
// returned and every batch has come back.
func (p *pool) flushLoop(slots *sync.WaitGroup) {
	returned := make(chan struct{})
	go func() {
		slots.Wait()
		close(returned)
	}()
	slotsDone := returned // nil once seen closed
	var flushes sync.WaitGroup
	defer flushes.Wait() // hold may still hand tasks to p.ready
	for {
		p.mu.Lock()
		var batch []*poolFinish
		max := 0
		if p.flushes == 0 || p.flushes < maxFlushes && p.batchOK && !p.w.noBatch.Load() {
			// A lease with a release in flight keeps its next one for
			// after: the same lease's releases stay in order.
			var rest []*poolFinish
			for _, f := range p.pending {
				if len(batch) < MaxBatch && !f.l.sending {
					batch = append(batch, f)
				} else {
					rest = append(rest, f)
				}
			}
			for _, f := range batch {
				f.l.sending = true
			}
			p.pending = rest
		}
		if len(batch) > 0 {
			p.flushes++
			if p.ctx.Err() == nil {
				max = p.free()
				p.held += max
			}
		}
		p.mu.Unlock()
		if len(batch) == 0 {
			if slotsDone == nil { // every slot returned: no more releases come
				p.mu.Lock()
				empty := len(p.pending) == 0
				p.mu.Unlock()
				if empty {
					return
				}
			}
			select {
			case <-p.wakeFlush: // a release queued or a batch came back
			case <-slotsDone:
				slotsDone = nil
			}
			continue
		}
		flushes.Go(func() {
			got := p.flush(batch, max)
			p.mu.Lock()
			for _, f := range batch {
				f.l.sending = false
			}
			p.held -= max - got
			p.flushes--
			p.mu.Unlock()
			p.kick()
		})
	}
}

// flush sends one batch and delivers each release's outcome.
func (p *pool) flush(batch []*poolFinish, max int) int {
	ups := make([]client.BatchUpdate, len(batch))
	for i, f := range batch {
		ups[i] = client.BatchUpdate{ID: f.l.task.TaskID, UpdateTaskRequest: f.req}
	}
	var claim *client.BatchClaim
	if max > 0 {
		r := p.w.claimRequest(0)
		claim = &client.BatchClaim{Owner: r.Owner, Lease: r.Lease, Statuses: r.Statuses, SetStatus: r.SetStatus, Max: max}
	}
	ctx, cancel := context.WithTimeout(ownKeys(context.Background()), p.w.cfg.ReleaseTimeout)
	defer cancel()
	if p.w.noBatch.Load() {
		p.mu.Lock()
		p.batchOK = false
		p.mu.Unlock()
		p.sendAlone(ctx, batch) // no batch route
		return 0
	}
	sent := time.Now()
	outs, next, err := p.w.c.QueueBatch(ctx, p.w.cfg.Tenant, p.w.cfg.Queue, ups, claim)
	noRoute := noBatchRoute(err)
	p.mu.Lock()
	p.batchOK = err == nil || !noRoute && p.batchOK
	p.mu.Unlock()
	if noRoute {
		// A server before version 6 (the leader moved to an older member
		// under the pool): single claims and releases for a while, these
		// releases first.
		p.w.noBatch.refused()
	}
	if err != nil && (noRoute || len(batch) > 1 && refusedWhole(err)) {
		// Nothing was written (one update's bad field refuses the whole
		// batch): each is sent alone, so that only a bad one fails, as
		// it would have without the batch.
		p.sendAlone(ctx, batch)
		return 0
	}
	for i, f := range batch {
		o := poolOutcome{err: err}
		if err == nil {
			o = poolOutcome{task: outs[i].Task, err: outs[i].Err}
		}
		f.done <- o
	}
	if err != nil {
		return 0
	}
	return p.hold(next, sent) // when stopping, given back with the rest
}

// sendAlone sends each release of batch in its own request.
func (p *pool) sendAlone(ctx context.Context, batch []*poolFinish) {
	for _, f := range batch {
		t, err := p.w.c.UpdateTask(ctx, p.w.cfg.Tenant, f.l.task.TaskID, f.req)
		f.done <- poolOutcome{task: t, err: err}
	}
}

// stopRenewer stops the renewal started when the pool claimed l.
func (l *Lease) stopRenewer() {
	if l.renewing != nil {
		l.renewing()
	}
}

// confirm renews l at once when its claim's round trip was longer than
// the renewal interval (a long poll that waited): the claim may have
// been applied anywhere in it, and the renewal's send time then bounds
// the lease tightly. A lease that cannot be confirmed so is released.
func (w *Worker) confirm(ctx context.Context, l *Lease, sent time.Time) error {
	if time.Since(sent) <= w.cfg.RenewEvery {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, w.cfg.Lease-w.cfg.SafetyMargin)
	err := l.renew(rctx)
	cancel()
	if err != nil {
		if !errors.Is(l.Err(), client.ErrFenced) && !errors.Is(l.Err(), client.ErrNotFound) {
			// Past the local deadline, maybe not the server's: give the
			// task back, never started (a stale token is refused, so
			// this is harmless).
			_ = l.sendRelease(w.cfg.ReleaseTimeout)
		}
		return fmt.Errorf("confirm the lease of task %q after a slow claim: %w", l.task.TaskID, err)
	}
	return nil
}

// refusedWhole reports whether err refused a whole batch without writing
// anything: a definitive answer of the server (a 4xx, or a quota's 507)
// or a request the client refused to send. Not a refusal of a retry whose
// first attempt may have applied (idempotency_expired), nor an answer
// after such an attempt (a 429 then): the batch is in doubt, and sending
// its updates one by one could apply them twice.
func refusedWhole(err error) bool {
	if errors.Is(err, client.ErrOutcomeUnknown) || errors.Is(err, client.ErrIdempotencyExpired) {
		return false
	}
	var e *client.Error
	if errors.As(err, &e) {
		return e.Status < 500 || errors.Is(err, client.ErrResourceExhausted)
	}
	return errors.Is(err, client.ErrInvalidArgument)
}

// unknownField reports whether err is a server's refusal of a request
// body naming field, which it does not know: what a server before
// version 6 answers to max (a batch claim) and unstarted (400
// invalid_argument, `malformed JSON: json: unknown field "max"`).
func unknownField(err error, field string) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status == http.StatusBadRequest && e.Code == "invalid_argument" &&
		strings.Contains(e.Message, `unknown field "`+field+`"`)
}

// noBatchRoute reports whether err is a server's answer that it has no
// queue batch route (before version 6: 404 not_found, "no such
// endpoint"), not a 404 about the tenant or the queue.
func noBatchRoute(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound && strings.HasPrefix(e.Message, "no such endpoint")
}
