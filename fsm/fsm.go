package fsm

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// FSM is the replicated state machine. It implements raft.BatchingFSM.
type FSM struct {
	mu sync.RWMutex
	// principals caches PrincipalByToken (token hash -> *principalCacheEntry).
	// A delete or rotation drops the old token's entry and a restore all
	// of them, so it holds at most one entry per principal (a cache entry
	// is outside the replicated state, as is the history).
	principals sync.Map
	st         *Store
	applied    uint64 // index of the last applied log entry
	clock      int64  // max leader time seen, Unix ms; never goes back

	// callers caches callerGrants (tenant, name -> *callerEntry); apply only.
	callers map[string]*callerEntry

	// Bookkeeping for operators and tests; not part of the replicated state.
	restoredIndex uint64 // snapshot index the state was last restored from
	appliedCount  uint64 // entries applied since this process started

	// changed is closed and replaced after every applied batch and restore.
	changed chan struct{}

	pending []Event  // events of the entry being applied
	history *History // recent events for watchers

	// resolving: dependency resolutions are being processed (deps.go),
	// so a task write they make does not start another round.
	resolving bool

	// idemNextExpiry: no idempotency record expires before this time (Unix
	// ms); 0 when not known. It lets purgeIdempotency skip its scan, and
	// is derived from the state (not part of it): a restore resets it.
	idemNextExpiry int64
	// Derived from the state like idemNextExpiry (a restore recomputes
	// them): the bytes sessions count for, the earliest session expiry,
	// the replicated limits as last read.
	sessBytes      int64
	sessNextExpiry int64
	// sessTenantBytes: sessBytes by owner tenant ("" the admin), against
	// Limits.SessionTenantBytes; sessUndo records the changes a command's
	// handler made to it, which an abort takes back.
	sessTenantBytes map[string]int64
	sessUndo        []sessDelta
	// idemBytes and idemTenantBytes are what Idempotency-Key records
	// count for against Limits.IdemBytes and IdemTenantBytes.
	idemBytes       int64
	idemTenantBytes map[string]int64
	limitsCache     *Limits
	// stats are operators' figures derived from the applied commands
	// (stats.go); not part of the replicated state.
	stats stats
	// queues is the queue statistics' index (queuestats.go), derived from
	// the state: a restore rebuilds it.
	queues *queueIndex
}

// Options configure an FSM.
type Options struct {
	// WatchHistoryBytes bounds the recent events kept for watchers, in
	// bytes (DefaultWatchHistoryBytes when 0).
	WatchHistoryBytes int64
}

// New returns an empty FSM with default options.
func New() *FSM { return NewWith(Options{}) }

// NewWith returns an empty FSM.
func NewWith(o Options) *FSM {
	return &FSM{st: newStore(), changed: make(chan struct{}), history: newHistory(o.WatchHistoryBytes), queues: newQueueIndex()}
}

// History is the FSM's recent events.
func (f *FSM) History() *History { return f.history }

// applyCtx is the per-log-entry context of Apply.
type applyCtx struct {
	index uint64
	seq   uint64 // fencing tokens issued so far in this entry
	now   int64
}

// nextSeq returns the next position in this entry: index<<16 | sequence.
// Strictly greater than every position of an earlier entry or earlier in
// this one (an entry holds at most MaxCommandsPerEntry commands of at most
// MaxTxnOps operations, far below 2^16).
func (c *applyCtx) nextSeq() uint64 {
	c.seq++
	return c.index<<16 | c.seq
}

// nextToken returns a fencing token strictly greater than every token issued
// at an earlier log index or earlier in this entry: index<<16 | sequence.
func (c *applyCtx) nextToken() uint64 { return c.nextSeq() }

// ApplyBatch applies committed log entries. For a command entry the response
// is a []*Result, one per command; for an entry that cannot be decoded it is
// an error (identical on every replica).
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	f.mu.Lock()
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = f.applyEntry(l.Index, l.Data)
		}
		if l.Index > f.applied {
			f.applied = l.Index
		}
		f.appliedCount++
	}
	f.notifyLocked()
	f.mu.Unlock()
	return out
}

// Apply applies one entry; raft uses ApplyBatch, this serves tests and tools.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

func (f *FSM) applyEntry(index uint64, data []byte) interface{} {
	cmds, err := DecodeEntry(data)
	if err != nil {
		return err
	}
	ctx := &applyCtx{index: index}
	results := make([]*Result, len(cmds))
	f.pending = f.pending[:0]
	for i, c := range cmds {
		if c.Now > f.clock {
			f.clock = c.Now
		}
		ctx.now = f.clock
		results[i] = f.applyCommand(ctx, c)
		if !results[i].Replay { // a replay keeps the index of the first answer
			results[i].Index = index
		}
	}
	f.queues.advance(f.clock)
	for i := range f.pending {
		f.pending[i].Index, f.pending[i].Pos, f.pending[i].Last = index, i, i == len(f.pending)-1
	}
	f.history.append(f.pending)
	return results
}

// applyCommand runs one command with idempotency and all-or-nothing rollback.
func (f *FSM) applyCommand(ctx *applyCtx, c *Command) *Result {
	f.purgeIdempotency(ctx.now, 64)
	f.purgeSessions(ctx.now, 4)
	var prior *idemRecord // an expired record under c's key
	var sess *sessionWrite
	switch {
	case c.Session != 0:
		var r *Result
		if r, sess = f.sessionCheck(ctx, c); r != nil {
			return r
		}
	case c.IdemKey != "":
		var r *Result
		if r, prior = f.idempotentReplay(ctx, c); r != nil {
			return r
		}
	}
	nev := len(f.pending)
	mark := f.markQuota(c.Tenant)
	sessBytes := f.sessBytes // handlers that drop sessions change it; an abort puts it back
	f.sessUndo = f.sessUndo[:0]
	f.st.begin()
	r := f.dispatch(ctx, c)
	if r.OK() {
		if why := f.overQuota(c, mark); why != "" {
			r = fail(CodeResourceExhausted, why, nil)
		}
	}
	if r.OK() {
		f.st.commit()
	} else {
		f.st.abort()
		f.sessBytes = sessBytes
		f.undoSessionCounts()
		f.pending = f.pending[:nev]
	}
	f.stats.settle(r.OK(), c.Kind, r.Code)
	f.queues.settle(r.OK(), ctx.now)
	switch {
	case sess != nil:
		f.sessionRemember(ctx, c, sess, r)
	case c.IdemKey != "":
		f.rememberIdempotent(ctx, c, r, prior)
	}
	return r
}

// dispatch runs c's handler from the command table (commands.go).
func (f *FSM) dispatch(ctx *applyCtx, c *Command) *Result {
	h, ok := handlers[c.Kind]
	if !ok {
		return fail(CodeInvalidArgument, fmt.Sprintf("unknown command kind %q", c.Kind), nil)
	}
	return h(f, ctx, c)
}

// jsonCarrier is an args struct with raw JSON fields; decodeArgs checks
// them, so that no log entry, however made, can make a handler store bytes
// that the JSON encoder would later refuse on every replica.
type jsonCarrier interface{ jsonFields() [][]byte }

// argsDecoded, when a test sets it, sees the args struct of every command
// decoded: TestCommandTableArgs holds the command table's Args column to
// what each handler decodes. Nil outside tests.
var argsDecoded func(k Kind, v any)

// decodeArgs decodes c.Args into v, or returns an invalid_argument result.
func decodeArgs(c *Command, v any) *Result {
	if argsDecoded != nil {
		argsDecoded(c.Kind, v)
	}
	if err := decode(c.Args, v); err != nil {
		return fail(CodeInvalidArgument, fmt.Sprintf("%s: bad arguments: %v", c.Kind, err), nil)
	}
	if jc, ok := v.(jsonCarrier); ok {
		for _, b := range jc.jsonFields() {
			if len(b) > 0 && !json.Valid(b) {
				return fail(CodeInvalidArgument, fmt.Sprintf("%s: a JSON field is not valid JSON", c.Kind), nil)
			}
		}
	}
	return nil
}

// AppliedIndex is the index of the last applied entry.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// notifyLocked wakes everyone waiting in WaitApplied or on Changed.
func (f *FSM) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Changed returns the applied index and a channel closed at the next change.
func (f *FSM) Changed() (uint64, <-chan struct{}) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied, f.changed
}

// WaitApplied blocks until the applied index reaches index or ctx ends.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		applied, ch := f.Changed()
		if applied >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Status is a consistent view of the FSM's position.
type Status struct {
	AppliedIndex  uint64
	StateDigest   string
	Clock         int64
	Keys          int
	RestoredIndex uint64
	AppliedCount  uint64
	// SessionBytes is what client sessions count for against
	// Limits.SessionBytes.
	SessionBytes int64
	// IdemBytes is what Idempotency-Key records count for against
	// Limits.IdemBytes.
	IdemBytes int64
}

// Status returns the applied index and the digest of the state at it.
func (f *FSM) Status() Status {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return Status{
		AppliedIndex:  f.applied,
		StateDigest:   digestOf(f.st.sum, f.clock),
		Clock:         f.clock,
		Keys:          f.st.Len(),
		RestoredIndex: f.restoredIndex,
		AppliedCount:  f.appliedCount,
		SessionBytes:  f.sessBytes,
		IdemBytes:     f.idemBytes,
	}
}

func digestOf(sum digestSum, clock int64) string {
	var b [40]byte
	for i, v := range sum {
		binary.BigEndian.PutUint64(b[i*8:], v)
	}
	binary.BigEndian.PutUint64(b[32:], uint64(clock))
	h := sha256.Sum256(b[:])
	return "sha256:" + hex.EncodeToString(h[:])
}

// Snapshot captures a point-in-time view in O(1); Persist does the I/O.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &snapshot{st: f.st.clone(), applied: f.applied, clock: f.clock}, nil
}

// Restore replaces the whole state with the snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, hdr, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.st, f.applied, f.clock, f.restoredIndex = st, hdr.Applied, hdr.Clock, hdr.Applied
	f.idemNextExpiry = 0
	f.limitsCache = nil
	f.principals.Clear()
	f.recountSessions()
	f.recountIdem()
	f.stats.recount(f.st)
	f.queues.rebuild(f.st, f.clock)
	f.history.reset(hdr.Applied)
	f.notifyLocked()
	f.mu.Unlock()
	return nil
}
