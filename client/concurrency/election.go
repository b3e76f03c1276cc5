package concurrency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/backoff"
)

// Election elects one leader among contenders, fenced: leadership is a
// Mutex held under a lease (see Mutex), and the leader's value is kept in
// the lock task's payload with the token it was proclaimed under. A
// leader's writes guarded by its Lease's client.Fence apply only while it leads.
//
// The contenders of one election share its MutexConfig.Name and each has
// its own Owner, which Leader and Observe report as the leader's identity.
// Campaign and Resign must not run concurrently on one Election; Leader,
// Observe and Proclaim may be called from any goroutine.
type Election struct {
	m *Mutex
}

// ElectionLeader is an elected leader as the cluster records it.
type ElectionLeader struct {
	Owner string // the leader's MutexConfig.Owner
	Value string // what it campaigned with or last proclaimed
	Token uint64 // its fencing token: every later leader's is larger
	// LeaseUntil is when its lease runs out by the cluster's clock,
	// unless renewed. A leader that stopped renewing stays reported until
	// another is elected: nothing is written when a lease runs out.
	LeaseUntil *time.Time
	Index      uint64 // the Raft index of the state this was read from
}

// electionValue is the payload of an election's task: the value and the
// token of the leader that proclaimed it. A payload under an older token
// is a former leader's: the current one has not proclaimed yet.
type electionValue struct {
	Token uint64 `json:"token"`
	Value string `json:"value"`
}

// NewElection validates cfg and returns an Election of c. It does no I/O.
func NewElection(c *client.Client, cfg MutexConfig) (*Election, error) {
	m, err := NewMutex(c, cfg)
	if err != nil {
		return nil, err
	}
	return &Election{m: m}, nil
}

// Name is the election's name: its task id and queue.
func (e *Election) Name() string { return e.m.name }

// Owner is this contender's identity.
func (e *Election) Owner() string { return e.m.Owner() }

// Lease returns this contender's leadership while it leads (client.Fence, Token,
// Lost, Err), else nil; a lost leadership stays until Resign or the next
// Campaign.
func (e *Election) Lease() *Lease { return e.m.Lease() }

// Campaign waits until this contender leads, then proclaims val and
// returns the leadership. It returns ctx's error when ctx ends first.
// Campaigning while leading proclaims val under the same leadership.
func (e *Election) Campaign(ctx context.Context, val string) (*Lease, error) {
	l, err := e.m.Lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	if err := e.proclaim(ctx, l, val); err != nil {
		// A leader without its value would be reported with the former
		// leader's: give the leadership back instead.
		rctx, cancel := context.WithTimeout(context.Background(), e.m.w.cfg.ReleaseTimeout)
		defer cancel()
		_ = e.m.Unlock(rctx)
		return nil, fmt.Errorf("campaign: proclaim: %w", err)
	}
	return l, nil
}

// Proclaim changes the leader's value without an election. It returns an
// error matching ErrElectionNotLeader when this contender does not lead,
// and one matching ErrLeaseLost when its leadership was lost.
func (e *Election) Proclaim(ctx context.Context, val string) error {
	l := e.m.Lease()
	if l == nil {
		return fmt.Errorf("proclaim in %q: %w", e.m.name, ErrElectionNotLeader)
	}
	return e.proclaim(ctx, l, val)
}

func (e *Election) proclaim(ctx context.Context, l *Lease, val string) error {
	payload, err := json.Marshal(electionValue{Token: l.Token(), Value: val})
	if err != nil {
		return err
	}
	_, err = l.Update(ctx, client.UpdateTaskRequest{Payload: payload})
	return err
}

// Resign gives up leadership, so that another contender is elected at
// once; it does nothing when this contender does not lead. A leadership
// that had been lost is reported (an error matching ErrLeaseLost).
func (e *Election) Resign(ctx context.Context) error {
	if err := e.m.Unlock(ctx); err != nil && !errors.Is(err, ErrNotLocked) {
		return fmt.Errorf("resign: %w", err)
	}
	return nil
}

// Leader returns the current leader, or an error matching
// ErrElectionNoLeader when there is none: never elected, resigned, or
// elected a moment ago and not yet proclaimed.
func (e *Election) Leader(ctx context.Context) (*ElectionLeader, error) {
	var meta client.Meta
	t, err := e.m.w.c.GetTask(ctx, e.m.w.cfg.Tenant, e.m.name, client.CaptureMeta(&meta))
	if errors.Is(err, client.ErrNotFound) {
		return nil, fmt.Errorf("leader of %q: %w", e.m.name, ErrElectionNoLeader)
	}
	if err != nil {
		return nil, fmt.Errorf("leader of %q: %w", e.m.name, err)
	}
	li, ok := leaderOf(t, meta.Index)
	if !ok {
		return nil, fmt.Errorf("leader of %q: %w", e.m.name, ErrElectionNoLeader)
	}
	return li, nil
}

// leaderOf reads the leader from the election's task: its owner, if it
// proclaimed a value under its current token.
func leaderOf(t *client.Task, index uint64) (*ElectionLeader, bool) {
	var v electionValue
	if t.Owner == "" || json.Unmarshal(t.Payload, &v) != nil || v.Token != t.FencingToken {
		return nil, false
	}
	return &ElectionLeader{Owner: t.Owner, Value: v.Value, Token: t.FencingToken, LeaseUntil: t.LeaseUntil, Index: index}, true
}

// Observe streams the election's leaders: the current one first, if any,
// then every newly elected leader and every value it proclaims, in order;
// a consumer that lags may miss intermediate ones but always gets the
// latest. It reads the state, then watches the task from that state's
// index (the caller needs read grants on the election's queue), starting
// over from a fresh read if the watch history it needs is gone. The
// channel is closed when ctx ends or the watch fails for good
// (ErrForbidden...).
func (e *Election) Observe(ctx context.Context) <-chan ElectionLeader {
	ch := make(chan ElectionLeader)
	go e.observe(ctx, ch)
	return ch
}

func (e *Election) observe(ctx context.Context, ch chan<- ElectionLeader) {
	defer close(ch)
	var last ElectionLeader // the last sent; Token 0: none
	send := func(li *ElectionLeader) bool {
		if li.Token == last.Token && li.Value == last.Value && li.Owner == last.Owner {
			return true
		}
		select {
		case ch <- *li:
			last = *li
			return true
		case <-ctx.Done():
			return false
		}
	}
	var bo backoff.Backoff
	for ctx.Err() == nil {
		from, err := e.observeState(ctx, send)
		if err != nil {
			if !errors.Is(err, client.ErrUnavailable) || backoff.Sleep(ctx, bo.Delay(0, backoff.Cap)) != nil {
				return
			}
			continue
		}
		bo.Reset()
		if err := e.observeChanges(ctx, from, send); !errors.Is(err, client.ErrCompacted) {
			return
		}
	}
}

// observeState sends the current leader, if any, and returns the index of
// the state read.
func (e *Election) observeState(ctx context.Context, send func(*ElectionLeader) bool) (uint64, error) {
	var meta client.Meta
	t, err := e.m.w.c.GetTask(ctx, e.m.w.cfg.Tenant, e.m.name, client.CaptureMeta(&meta))
	switch {
	case errors.Is(err, client.ErrNotFound):
		return meta.Index, nil // not created yet: the watch will see it
	case err != nil:
		return 0, err
	}
	if li, ok := leaderOf(t, meta.Index); ok && !send(li) {
		return 0, ctx.Err()
	}
	return meta.Index, nil
}

// observeChanges sends the leaders the task's changes after index from
// show, until ctx ends or the watch fails; client.ErrUnavailable after the
// client's retries is waited out.
func (e *Election) observeChanges(ctx context.Context, from uint64, send func(*ElectionLeader) bool) error {
	w := e.m.w.c.Watch(ctx, e.m.w.cfg.Tenant, client.WatchOptions{Resources: []string{"tasks"}, Prefix: e.m.name, FromIndex: from})
	defer w.Close()
	var bo backoff.Backoff
	for {
		ev, err := w.Next(ctx)
		switch {
		case errors.Is(err, client.ErrUnavailable) && ctx.Err() == nil:
			if err := backoff.Sleep(ctx, bo.Delay(0, backoff.Cap)); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		bo.Reset()
		if ev.Key != e.m.name || ev.Type != "put" {
			continue // a longer id with the same prefix; a delete elects nobody
		}
		var t client.Task
		if json.Unmarshal(ev.Value, &t) != nil {
			continue
		}
		if li, ok := leaderOf(&t, ev.Index); ok && !send(li) {
			return ctx.Err()
		}
	}
}
