package replica

import (
	"context"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// Claim is the answer to a queue claim.
type Claim struct {
	// Res is the claim's result, applied or replayed; nil when nothing was
	// claimable and nothing was written (answered 204, with no index).
	Res *fsm.Result
	// Replay, with Res nil: the answer is this node's remembered 204 to
	// an earlier attempt of the same keyed claim (emptyClaims).
	Replay bool
}

// ClaimQueue claims the best task of args.Queue for the caller, waiting up
// to wait (a long poll): it proposes a claim only when the leader's state
// shows a claimable task, and otherwise waits for the next applied change
// or the next lease expiry (WaitClaimable), never past the deadline and
// never in a busy loop. Errors are the node's or ctx's, or
// ErrLeadershipChanged.
func (r *Replica) ClaimQueue(ctx context.Context, c Caller, args *fsm.QueueClaimArgs, wait time.Duration) (Claim, error) {
	cmd := r.Command(c, fsm.KindTaskQueueClaim, args)
	keyed := retried(cmd)
	propose := func(final bool) (*fsm.Result, error) {
		attempt := *args
		attempt.Final = final
		round := *cmd
		round.Args = fsm.EncodeArgs(&attempt)
		// Each round is judged at its own time: a task that became due,
		// or a lease that ran out, while the request waited is claimable
		// at the time Claimable saw, not at the request's arrival.
		round.Now = r.Now()
		// And stamped at its own time (Propose): the first lifecycle task
		// may have come while the request waited.
		return r.Propose(ctx, &round)
	}
	deadline := time.Now().Add(wait)
	if keyed && r.empty.answered(cmd, time.Now()) {
		// A late duplicate of a claim this node answered 204 without a
		// write: the same answer, not a task nobody would work on.
		return Claim{Replay: true}, nil
	}
	replayChecked := !keyed
	for {
		final := !time.Now().Before(deadline)
		changed := r.Changed()
		ok, nextExpiry := r.fsm.Claimable(cmd.Tenant, args.Queue, args.Statuses, r.Now())
		if !ok && !replayChecked {
			// A retry of a claim that was applied must get its answer
			// again, even when nothing is claimable now (the claim took
			// the task), and without waiting. (When a task is claimable,
			// the proposal replays it: the FSM looks up the key first.)
			// The write barrier has made every acknowledged write of
			// earlier terms visible here.
			replayChecked = true
			if res, ok := r.Replay(cmd); ok {
				return Claim{Res: res}, nil
			}
		}
		if ok {
			res, err := propose(final)
			if err != nil {
				return Claim{}, err
			}
			if res.Outcome != fsm.OutcomeNoContent || !res.OK() || final {
				return Claim{Res: res}, nil
			}
			continue
		}
		if final {
			// Nothing claimable: nothing is written, with a key or a
			// session place or without (an idle long-poll costs no log
			// entry). A retry finds no record and looks again; a claim
			// that did claim left its record, which the replay check
			// above finds.
			if keyed {
				r.empty.add(cmd, time.Now())
			}
			return Claim{}, nil
		}
		if err := r.WaitClaimable(ctx, changed, deadline, nextExpiry); err != nil {
			return Claim{}, err
		}
	}
}

// WaitClaimable waits until a task of the queue may have become claimable:
// the state changed (changed, from Changed, is closed), the next lease of
// the queue ran out (nextExpiry, Unix ms, 0: none), or the deadline
// passed. It fails when ctx ends or this node no longer leads.
func (r *Replica) WaitClaimable(ctx context.Context, changed <-chan struct{}, deadline time.Time, nextExpiry int64) error {
	return r.WaitChange(ctx, changed, deadline, nextExpiry)
}

// Changed returns a channel that is closed at the next applied change of
// the state; take it before looking at the state, then wait on it.
func (r *Replica) Changed() <-chan struct{} {
	_, changed := r.fsm.Changed()
	return changed
}

// WaitChange is a long poll's wait on the leader: until changed (from
// Changed) is closed, the leader's clock reaches wakeAt (Unix ms, 0:
// never), or the deadline passes. It fails when ctx ends or this node no
// longer leads, since what the poll waits for is decided on the leader.
func (r *Replica) WaitChange(ctx context.Context, changed <-chan struct{}, deadline time.Time, wakeAt int64) error {
	wake := time.Until(deadline)
	if wakeAt != 0 {
		if d := time.Duration(wakeAt-r.Now()) * time.Millisecond; d < wake {
			wake = d
		}
	}
	timer := time.NewTimer(max(wake, time.Millisecond))
	defer timer.Stop()
	select {
	case <-changed:
	case <-timer.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !r.node.IsLeader() {
		return ErrLeadershipChanged
	}
	return nil
}
