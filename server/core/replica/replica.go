// Package replica is the one way the HTTP layer reaches the replicated
// state, in the manner of etcd's EtcdServer or rqlite's Store: it builds a
// command (the leader's time, the caller, what identifies its retries, the
// entry version its kind and the state need), proposes it and waits for
// its result; it passes the read barrier of a consistency level; and it
// makes a queue claim, long-polling until a task may be claimable.
// Handlers above it decode, authorize, call it and answer; nothing below
// it knows of HTTP.
package replica

import (
	"context"
	"errors"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// Node is what the facade needs from the Raft member (node.Node).
type Node interface {
	IsLeader() bool
	// Apply proposes a command and waits until it is applied.
	Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error)
	// ReadBarrier: a read of the local state after it is linearizable.
	ReadBarrier(ctx context.Context) error
	// WriteBarrier: this leader has applied every entry of earlier terms.
	WriteBarrier(ctx context.Context) error
}

// Config configures a Replica.
type Config struct {
	Node Node
	FSM  *fsm.FSM
	// ClockOffset, if set, skews the clock this node stamps into commands
	// (batond --failpoints).
	ClockOffset func() time.Duration
	// IdempotencyTTL is how long the answer to a write with an
	// Idempotency-Key is remembered.
	IdempotencyTTL time.Duration
}

// Replica is this node's facade over its Raft member and state machine.
type Replica struct {
	node    Node
	fsm     *fsm.FSM
	offset  func() time.Duration
	idemTTL int64
	// empty: keyed queue claims answered 204 without a write.
	empty emptyClaims
}

// New returns the facade over cfg's node and state machine.
func New(cfg Config) *Replica {
	return &Replica{node: cfg.Node, fsm: cfg.FSM, offset: cfg.ClockOffset, idemTTL: cfg.IdempotencyTTL.Milliseconds()}
}

// Now is the leader's clock as stamped into commands, in Unix ms.
func (r *Replica) Now() int64 {
	var off time.Duration
	if r.offset != nil {
		off = r.offset()
	}
	return time.Now().Add(off).UnixMilli()
}

// Caller is who writes, and what identifies the write's retries: an
// Idempotency-Key, which wins, or a place in a client session (Session,
// Seq, Ack; fsm/sessions.go), each with the request's fingerprint.
type Caller struct {
	Tenant    string
	Principal string // "": the admin, or the node itself
	IdemKey   string
	Session   uint64
	Seq       uint64
	Ack       uint64
	// Fingerprint identifies the request's content (method, path, query,
	// body) for the retry identity above; unused without one.
	Fingerprint []byte
}

// Command builds the command of a write: the leader's time, the caller and
// its retry identity, and args, whose entry version fsm.NewCommand derives
// from the args' fields; what the state decides is stamped by Propose.
func (r *Replica) Command(c Caller, kind fsm.Kind, args any) *fsm.Command {
	cmd := fsm.NewCommand(kind, r.Now(), c.Tenant, c.Principal, args)
	switch {
	case c.IdemKey != "":
		cmd.IdemKey, cmd.IdemFP, cmd.IdemTTL = c.IdemKey, c.Fingerprint, r.idemTTL
	case c.Session != 0:
		cmd.Session, cmd.Seq, cmd.Ack, cmd.IdemFP = c.Session, c.Seq, c.Ack, c.Fingerprint
	}
	return cmd
}

// retried reports whether cmd carries what identifies its retries.
func retried(c *fsm.Command) bool { return c.IdemKey != "" || c.Session != 0 }

// Propose stamps cmd's entry version where its kind's table row says the
// state decides it (fsm.FSM.Stamp), proposes it and waits until it is
// applied. Errors are the node's (node.ErrNotLeader, ErrOutcomeUnknown...)
// or ctx's.
func (r *Replica) Propose(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error) {
	r.fsm.Stamp(cmd)
	return r.node.Apply(ctx, cmd)
}

// ProposeOwn proposes a command of the node itself (a purge, a sweep, its
// member record): no caller, the leader's time.
func (r *Replica) ProposeOwn(ctx context.Context, kind fsm.Kind, tenant string, args any) (*fsm.Result, error) {
	return r.Propose(ctx, r.Command(Caller{Tenant: tenant}, kind, args))
}

// Replay returns the answer remembered for cmd's retry identity (its
// Idempotency-Key or session place, and fingerprint), if the state holds
// one, without proposing anything.
func (r *Replica) Replay(cmd *fsm.Command) (*fsm.Result, bool) {
	return r.fsm.ReplayAnswer(cmd, r.Now())
}

// Consistency is how fresh a read must be.
type Consistency int

const (
	// Linearizable: this node confirmed with a quorum that it still leads
	// and applied everything committed before the read (node.ReadBarrier).
	Linearizable Consistency = iota
	// Leader: this node leads and has applied every entry of earlier terms
	// (node.WriteBarrier); what a write checks before it is proposed.
	Leader
	// Stale: this node's state as it is, leader or not.
	Stale
)

// View is a read's place in the log: the state after Read returned holds
// at least every entry up to Index.
type View struct {
	Index uint64
}

// Read passes the barrier of level and returns the index the state had
// reached. The records themselves are read from the state machine after
// it (fsm's read methods, each of which returns the index it read at).
func (r *Replica) Read(ctx context.Context, level Consistency) (View, error) {
	var err error
	switch level {
	case Linearizable:
		err = r.node.ReadBarrier(ctx)
	case Leader:
		err = r.node.WriteBarrier(ctx)
	}
	if err != nil {
		return View{}, err
	}
	return View{Index: r.fsm.AppliedIndex()}, nil
}

// ErrLeadershipChanged: this node stopped leading while a request waited.
var ErrLeadershipChanged = errors.New("leadership changed while waiting; retry")
