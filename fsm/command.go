package fsm

import (
	"encoding/json"

	"github.com/baton-dev/baton/fsm/wire"
)

// Kind names a command.
type Kind string

// The command kinds. Each has an args struct (below or in its resource's
// file) carried msgpack-encoded in Command.Args; the command table
// (commands.go) lists every kind with its args struct and handler.
const (
	KindTenantPut       Kind = "tenant.put"
	KindPrincipalCreate Kind = "principal.create"
	KindPrincipalDelete Kind = "principal.delete"
	// KindPrincipalRotate replaces a principal's token by one the leader
	// generated (its hash and salt are in the args).
	KindPrincipalRotate Kind = "principal.rotate"
	KindMemberSet       Kind = "member.set"
	// KindMemberDelete forgets a removed member. KindMemberSet doubles as
	// the entry every new leader commits at the start of its term: after
	// it, every entry of the term reaches the FSM (Raft's own no-op and
	// barrier entries never do), so reads can wait for the FSM to reach
	// the commit index, and followers know where to forward.
	KindMemberDelete Kind = "member.delete"
)

// Command is one replicated request. Everything Apply needs to decide is in
// it: the leader's clock, the caller, generated values.
type Command struct {
	Kind Kind
	// Now is the leader's wall-clock time in Unix milliseconds when it
	// proposed the command. Replicas use it instead of their own clocks.
	Now int64
	// Tenant and Principal identify the caller ("" principal: the admin).
	Tenant    string
	Principal string
	// IdemKey and IdemFP carry an Idempotency-Key and the fingerprint of the
	// request it came with; IdemTTL is how long the answer is remembered.
	IdemKey string
	IdemFP  []byte
	IdemTTL int64
	// Session, Seq and Ack place the command in a client session (see
	// sessions.go): the session's id, the write's number in it, and the
	// lowest number the client still waits for. All zero outside one.
	// IdemFP is then the request's fingerprint. Entries with a session
	// command are written as EntryVersion2.
	Session uint64
	Seq     uint64
	Ack     uint64
	// Args is the msgpack encoding of the kind's argument struct.
	Args []byte
	// ver is the first entry version that may carry the args' fields
	// (NewCommand sets it from entryVersioner; DecodeEntry to the entry's
	// version). Not encoded: the entry's version carries it.
	ver byte
}

// entryVersioner is implemented by argument structs that gained fields
// after their kind was first written: entryVersion returns the first entry
// version that may carry the fields set (0 when none of them is), so that
// the command goes in an entry which a member that predates the fields
// refuses instead of applying without them. A kind that is new altogether
// says so in its command table row (commandSpec.Since) instead.
type entryVersioner interface{ entryVersion() byte }

// NewCommand builds a command with args encoded.
func NewCommand(kind Kind, now int64, tenant, principal string, args any) *Command {
	c := &Command{Kind: kind, Now: now, Tenant: tenant, Principal: principal, Args: encode(args)}
	if v, ok := args.(entryVersioner); ok {
		c.ver = v.entryVersion()
	}
	c.ver = max(c.ver, fenceEntryVersion(kind, principal, args))
	return c
}

// Size is about how many bytes c takes in a log entry: its variable-length
// fields, plus a fixed allowance for the field names and integers.
func (c *Command) Size() int {
	return 120 + len(c.Kind) + len(c.Tenant) + len(c.Principal) + len(c.IdemKey) + len(c.IdemFP) + len(c.Args)
}

// Outcome says how a successful result is presented.
type Outcome uint8

// Outcomes of a successful command.
const (
	OutcomeOK        Outcome = iota // 200
	OutcomeCreated                  // 201
	OutcomeNoContent                // 204
)

// Result is the answer of one command, produced by Apply on every replica
// and delivered to the waiting request on the leader.
type Result struct {
	// Code is "" on success, else an error code of docs/api.md (fenced, ...).
	Code    string
	Message string
	// Details holds the JSON object of error details, if any.
	Details json.RawMessage
	Outcome Outcome
	// Value is the JSON encoding of the response body, once made (see JSON).
	Value json.RawMessage
	// Obj is the response body before encoding. Apply leaves the encoding
	// to whoever needs it (the leader answering, an idempotency record),
	// so followers never spend time on JSON they would throw away.
	Obj any `codec:"-"`
	// Index is the log index at which the command was applied.
	Index uint64
	// Replay is set when the answer was remembered for an Idempotency-Key.
	Replay bool
}

// OK reports whether the command succeeded.
func (r *Result) OK() bool { return r.Code == "" }

// Error codes the FSM produces (package wire defines every code).
const (
	CodeInvalidArgument     = wire.CodeInvalidArgument
	CodeNotFound            = wire.CodeNotFound
	CodeAlreadyExists       = wire.CodeAlreadyExists
	CodeLeaseHeld           = wire.CodeLeaseHeld
	CodeFenced              = wire.CodeFenced
	CodeVersionMismatch     = wire.CodeVersionMismatch
	CodeIdempotencyMismatch = wire.CodeIdempotencyMismatch
	CodeIdempotencyExpired  = wire.CodeIdempotencyExpired
	CodeResourceExhausted   = wire.CodeResourceExhausted
	CodeMissingChunks       = wire.CodeMissingChunks
	CodeForbidden           = wire.CodeForbidden
	CodeReferenced          = wire.CodeReferenced
)

func fail(code, msg string, details any) *Result {
	r := &Result{Code: code, Message: msg}
	if details != nil {
		r.Details = mustJSON(details)
	}
	return r
}

func okValue(outcome Outcome, v any) *Result {
	return &Result{Outcome: outcome, Obj: v}
}

// JSON returns the encoded response body ("" for none), encoding it once.
// Objects in results are never changed after Apply returns them.
func (r *Result) JSON() json.RawMessage {
	if r.Value == nil && r.Obj != nil {
		r.Value = mustJSON(r.Obj)
	}
	return r.Value
}

// mustJSON encodes values of this package's own types; encoding/json sorts
// map keys, so the bytes are deterministic.
//
// A task, the answer to most writes, is encoded by Task.MarshalJSON
// directly: its bytes are json.Marshal's own output (compact, HTML
// escaped), which json.Marshal(t) would check and compact once more into
// the same bytes and copy twice (TestMustJSONTask). Every replica encodes
// the answer to every task write, since its client session keeps it;
// that second pass was a third of the encoding's CPU time (perf, cas
// C=64).
//
// The answers of the queue's batches (UpdateBatchAnswer, ClaimBatch) are
// lists of tasks: they are written element by element, each task by
// Task.MarshalJSON, into json.Marshal's bytes for the whole answer
// (TestMustJSONTask), where json.Marshal would check and compact every
// task's bytes once more. That second pass was over half of the answer's
// encoding, the largest cost of a follower's apply (perf, queue W=64).
func mustJSON(v any) json.RawMessage {
	var b []byte
	var err error
	switch o := v.(type) {
	case *Task:
		if o == nil {
			b, err = json.Marshal(v)
		} else {
			b, err = o.MarshalJSON()
		}
	case *UpdateBatchAnswer:
		if o == nil {
			b, err = json.Marshal(v)
		} else {
			b, err = o.appendJSON(make([]byte, 0, 512*(len(o.Results)+len(o.Next)+1)))
		}
	case *ClaimBatch:
		if o == nil {
			b, err = json.Marshal(v)
		} else {
			b = append(make([]byte, 0, 512*(len(o.Tasks)+1)), `{"tasks":`...)
			if b, err = appendJSONList(b, o.Tasks); err == nil {
				b = append(b, '}')
			}
		}
	default:
		b, err = json.Marshal(v)
	}
	if err != nil {
		panic("fsm: json: " + err.Error())
	}
	return b
}

// appendJSON appends json.Marshal(a)'s bytes to b.
func (a *UpdateBatchAnswer) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"results":`...)
	if a.Results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range a.Results {
			if i > 0 {
				b = append(b, ',')
			}
			o := &a.Results[i]
			if o.Task != nil && o.Error == nil {
				t, err := o.Task.MarshalJSON()
				if err != nil {
					return nil, err
				}
				b = append(append(append(b, `{"task":`...), t...), '}')
				continue
			}
			e, err := json.Marshal(o)
			if err != nil {
				return nil, err
			}
			b = append(b, e...)
		}
		b = append(b, ']')
	}
	b = append(b, `,"next":`...)
	b, err := appendJSONList(b, a.Next)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendJSONList appends json.Marshal(list)'s bytes to b: a task by
// Task.MarshalJSON, anything else by json.Marshal.
func appendJSONList(b []byte, list []any) ([]byte, error) {
	if list == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, v := range list {
		if i > 0 {
			b = append(b, ',')
		}
		var e []byte
		var err error
		if t, ok := v.(*Task); ok && t != nil {
			e, err = t.MarshalJSON()
		} else {
			e, err = json.Marshal(v)
		}
		if err != nil {
			return nil, err
		}
		b = append(b, e...)
	}
	return append(b, ']'), nil
}
