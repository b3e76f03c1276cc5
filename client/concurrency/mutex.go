package concurrency

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/backoff"
	"github.com/google/uuid"
)

// Errors of Mutex and Election.
var (
	// ErrLocked: TryLock found the mutex held by another holder.
	ErrLocked = errors.New("mutex locked by another holder")
	// ErrNotLocked: Unlock of a Mutex that does not hold its lock.
	ErrNotLocked = errors.New("mutex not locked by this holder")
	// ErrElectionNoLeader: Leader found no leader (none elected, or the
	// last one resigned).
	ErrElectionNoLeader = errors.New("election: no leader")
	// ErrElectionNotLeader: Proclaim by a contender that does not lead.
	ErrElectionNotLeader = errors.New("election: not leader")
)

// The statuses of a lock's task: free when nobody holds it (created so, and
// set back by Unlock), held from each claim on. A held task whose lease ran
// out is claimable too: its holder is gone.
const (
	lockFree = "free"
	lockHeld = "held"
)

// DefaultMutexLease is the lease of a Mutex or Election that sets none:
// shorter than a Worker's, since it is how long a crashed holder keeps
// everyone else waiting.
const DefaultMutexLease = 15 * time.Second

// MutexConfig configures a Mutex or an Election.
type MutexConfig struct {
	// Tenant and Name are required. The lock is the task Name, alone in a
	// queue also called Name (created on first use, status "free" or
	// "held"): tasks grants on Name's queue decide who may take it. Give
	// locks names of their own (e.g. "lock.reindex"): a task or queue of
	// that name that is not a lock's is refused.
	Tenant, Name string
	// Owner names this contender in the task's owner field (Election's
	// Leader reports it). Each contender needs its own: two holders with
	// the same Owner could take the lock from one another, and a cancelled
	// Lock gives back a claim in this Owner's name that it may have made
	// unknowingly. Default: "holder-" and a random UUID.
	Owner string
	// Lease is the lease asked for on every claim and renewal (default
	// DefaultMutexLease): after a holder stops renewing (crashed, paused,
	// cut off), the others wait at most this long. RenewEvery (default
	// Lease/3), SafetyMargin (default Lease/10) and ReleaseTimeout are as
	// in WorkerConfig.
	Lease, RenewEvery, SafetyMargin, ReleaseTimeout time.Duration
	// Wait is how long one claim waits on the server (long poll) before
	// Lock asks again, at most 60s (default DefaultWorkerWait). Lock
	// itself waits until its context ends.
	Wait time.Duration
}

// Mutex is a distributed lock, fenced: built on a task claimed with a
// lease, renewed in the background while held. Whoever holds it has a
// fencing token larger than every earlier holder's; writes guarded by the
// Lease's client.Fence (KV, refs, artifacts, checkpoints, ops, transactions) or
// made through Lease.Update apply only while that token is current, so a
// holder that was paused past its lease and took over cannot overwrite its
// successor's work, whatever it believes.
//
// Lock waits with the server's long-polling queue claim: it is woken by a
// release or by the holder's lease running out, never by polling. A Mutex
// is one contender: make one per goroutine or process that competes. Lock
// and TryLock must not run concurrently on one Mutex; Unlock, Lease and
// the Lease's methods may be called from any goroutine.
type Mutex struct {
	w    *Worker
	name string

	mu      sync.Mutex
	lease   *Lease // the current hold; nil when none
	stop    func() // stops lease's renewer
	locking bool
	ensured bool // the lock's task was seen to exist and be a lock's
}

// NewMutex validates cfg and returns a Mutex of c. It does no I/O.
func NewMutex(c *client.Client, cfg MutexConfig) (*Mutex, error) {
	if err := required("tenant", cfg.Tenant, "mutex name", cfg.Name); err != nil {
		return nil, err
	}
	if cfg.Owner == "" {
		cfg.Owner = "holder-" + uuid.NewString()
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultMutexLease
	}
	w, err := NewWorker(c, WorkerConfig{Tenant: cfg.Tenant, Queue: cfg.Name, Owner: cfg.Owner,
		Lease: cfg.Lease, Statuses: lockStatuses, SetStatus: lockHeld, Wait: max(cfg.Wait, 0),
		RenewEvery: cfg.RenewEvery, SafetyMargin: cfg.SafetyMargin, ReleaseTimeout: cfg.ReleaseTimeout})
	if err != nil {
		return nil, err
	}
	return &Mutex{w: w, name: cfg.Name}, nil
}

// Name is the lock's name: its task id and queue.
func (m *Mutex) Name() string { return m.name }

// Owner is the name this contender's claims carry.
func (m *Mutex) Owner() string { return m.w.cfg.Owner }

// Lease returns the current hold, or nil when the Mutex holds nothing. A
// lease that was lost stays here (Err says why) until Unlock or the next
// Lock.
func (m *Mutex) Lease() *Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lease
}

// Lock waits until it holds the lock, then returns the hold: its client.Fence and
// Token guard writes, Lost and Err report a loss (the renewals refused as
// fenced, or failing until the lease may have run out). It returns the
// current hold when the Mutex holds it already. When ctx ends first it
// returns ctx's error, and gives back a claim that the server may have
// made for it meanwhile. Other errors: a forbidden or invalid lock, or an
// client.ErrUnavailable cluster (after the client's retries).
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) { return m.lock(ctx, true) }

// TryLock takes the lock if nobody holds it, else returns an error
// matching ErrLocked at once.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) { return m.lock(ctx, false) }

func (m *Mutex) lock(ctx context.Context, wait bool) (*Lease, error) {
	if l, err := m.begin(); l != nil || err != nil {
		return l, err
	}
	defer m.end()
	if err := m.ensure(ctx); err != nil {
		return nil, err
	}
	w := m.w.cfg.Wait
	if !wait {
		w = -1
	}
	var bo backoff.Backoff
	for {
		l, err := m.w.claimWait(ctx, w)
		switch {
		case err == nil && l != nil:
			m.hold(l)
			return l, nil
		case ctx.Err() != nil:
			m.abandon()
			return nil, fmt.Errorf("lock %q: %w", m.name, context.Cause(ctx))
		case err == nil && !wait:
			return nil, fmt.Errorf("lock %q: %w", m.name, ErrLocked)
		case err == nil:
			// The wait ran out. The task may have been deleted meanwhile
			// (then nothing would ever be claimable): look again.
			m.setEnsured(false)
			if err := m.ensure(ctx); err != nil {
				return nil, err
			}
		case l != nil || errors.Is(err, client.ErrUnavailable):
			// A claim that could not be confirmed (given back already), or
			// a cluster without a leader for longer than the client's
			// retries: try again, with a backoff.
			if err := backoff.Sleep(ctx, bo.Delay(0, backoff.Cap)); err != nil {
				m.abandon()
				return nil, fmt.Errorf("lock %q: %w", m.name, err)
			}
		default:
			return nil, fmt.Errorf("lock %q: %w", m.name, err)
		}
	}
}

// begin starts a Lock: the current hold if it is live, an error if another
// Lock runs, (nil, nil) to go on.
func (m *Mutex) begin() (*Lease, error) {
	m.mu.Lock()
	if m.locking {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: Lock of mutex %q called while another Lock of the same Mutex runs; use one Mutex per contender",
			client.ErrInvalidArgument, m.name)
	}
	l, stop := m.lease, m.stop
	if l != nil && l.Err() == nil {
		m.mu.Unlock()
		return l, nil
	}
	m.lease, m.stop, m.locking = nil, nil, true
	m.mu.Unlock()
	if stop != nil {
		stop() // the renewer of a hold that was lost has ended or ends now
	}
	return nil, nil
}

func (m *Mutex) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.locking = false
}

// hold makes l the current hold and starts renewing it.
func (m *Mutex) hold(l *Lease) {
	stop := l.startRenewer()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lease, m.stop = l, stop
}

func (m *Mutex) setEnsured(v bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ensured = v
}

// ensure creates the lock's task unless it is known to exist, and checks
// that an existing one is a lock's: alone in its own queue, in a lock's
// status, without max_attempts (a queue policy could give it some, and the
// lock would go dead after that many holders).
func (m *Mutex) ensure(ctx context.Context) error {
	m.mu.Lock()
	ok := m.ensured
	m.mu.Unlock()
	if ok {
		return nil
	}
	tenant := m.w.cfg.Tenant
	t, err := m.w.c.CreateTask(ownKeys(ctx), tenant, client.CreateTaskRequest{TaskID: m.name, Queue: m.name, Status: lockFree})
	if errors.Is(err, client.ErrAlreadyExists) {
		t, err = m.w.c.GetTask(ctx, tenant, m.name)
	}
	if err != nil {
		return fmt.Errorf("lock %q: create or read its task: %w", m.name, err)
	}
	switch {
	case t.Queue != m.name:
		return fmt.Errorf("%w: lock %q: task %q exists in queue %q; a lock's task is alone in a queue of its name",
			client.ErrInvalidArgument, m.name, m.name, t.Queue)
	case !isLockStatus(t.Status):
		return fmt.Errorf("%w: lock %q: its task has status %q, not %q or %q (was it failed or completed through its Lease?)",
			client.ErrInvalidArgument, m.name, t.Status, lockFree, lockHeld)
	case t.MaxAttempts != 0:
		return fmt.Errorf("%w: lock %q: its task has max_attempts %d (a policy of queue %q?); a lock's must be unlimited",
			client.ErrInvalidArgument, m.name, t.MaxAttempts, m.name)
	}
	m.setEnsured(true)
	return nil
}

// abandon gives back a claim the server may have made for a Lock whose
// context ended while its long poll was under way: the answer was lost,
// the lock would stay taken until its lease ran out. Best effort: only a
// lease in this contender's name (Owner is one per contender) is given
// back, and only under its current token.
func (m *Mutex) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), m.w.cfg.ReleaseTimeout)
	defer cancel()
	t, err := m.w.c.GetTask(ctx, m.w.cfg.Tenant, m.name)
	if err != nil || t.Owner != m.w.cfg.Owner {
		return
	}
	_, _ = m.w.c.UpdateTask(ctx, m.w.cfg.Tenant, m.name,
		client.UpdateTaskRequest{FencingToken: &t.FencingToken, Status: new(lockFree), Release: new(true)})
}

// Unlock gives the lock back, stopping the renewals. It returns an error
// matching ErrNotLocked when the Mutex holds nothing, and the loss (an
// error matching ErrLeaseLost) when the hold had been lost: writes made
// under it after the loss were refused, but the caller's critical section
// may have overlapped its successor's. When the release itself fails
// (client.ErrUnavailable...), the lock frees itself when the lease runs out.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	l, stop := m.lease, m.stop
	m.lease, m.stop = nil, nil
	m.mu.Unlock()
	if l == nil {
		return fmt.Errorf("unlock %q: %w", m.name, ErrNotLocked)
	}
	stop()
	if _, err := l.Update(ctx, client.UpdateTaskRequest{Status: new(lockFree), Release: new(true)}); err != nil {
		return fmt.Errorf("unlock %q: %w", m.name, err)
	}
	return nil
}

// lockStatuses are the statuses of a lock's task.
var lockStatuses = []string{lockFree, lockHeld}

func isLockStatus(s string) bool { return slices.Contains(lockStatuses, s) }
