package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Operation ledger command kinds.
const (
	KindOpBegin  Kind = "op.begin"
	KindOpFinish Kind = "op.finish"
)

// Op states.
const (
	OpStarted   = "started"
	OpSucceeded = "succeeded"
	OpFailed    = "failed"
	OpUnknown   = "unknown"
)

// Op is the record of one external side effect.
type Op struct {
	Tenant, ID, Kind, ParamsDigest, TaskID, State string
	Result                                        []byte // JSON
	CreatedAt, UpdatedAt                          int64
}

type opJSON struct {
	OpID         string          `json:"op_id"`
	Kind         string          `json:"kind"`
	ParamsDigest string          `json:"params_digest"`
	TaskID       string          `json:"task_id"`
	State        string          `json:"state"`
	Result       json.RawMessage `json:"result"`
	CreatedAt    string          `json:"created_at"`
	UpdatedAt    string          `json:"updated_at"`
}

// MarshalJSON renders the op record of docs/api.md.
func (o *Op) MarshalJSON() ([]byte, error) {
	return mustJSON(opJSON{OpID: o.ID, Kind: o.Kind, ParamsDigest: o.ParamsDigest, TaskID: o.TaskID,
		State: o.State, Result: jsonOrNull(o.Result), CreatedAt: FormatMillis(o.CreatedAt),
		UpdatedAt: FormatMillis(o.UpdatedAt)}), nil
}

// Terminal reports whether the op's state can never change again.
func (o *Op) Terminal() bool { return o.State == OpSucceeded || o.State == OpFailed }

// OpBeginArgs starts (or finds) an op.
type OpBeginArgs struct {
	ID, Kind, ParamsDigest, TaskID string
	Fence                          *Fence
}

// OpFinishArgs records an op's outcome.
type OpFinishArgs struct {
	ID, State string
	Result    []byte
	Fence     *Fence
}

func opKey(tenant, id string) string { return "t/" + tenant + "/op/" + id }

func getOp(st *Store, tenant, id string) (*Op, bool) {
	raw, ok := st.Get(opKey(tenant, id))
	if !ok {
		return nil, false
	}
	var o Op
	if decode(raw, &o) != nil {
		return nil, false
	}
	return &o, true
}

func (f *FSM) putOp(o *Op) {
	f.st.Put(opKey(o.Tenant, o.ID), encode(o))
	f.emit(o.Tenant, ResourceOps, o.ID, o.ID, EventPut, o)
}

func applyOpBegin(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a OpBeginArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	if o, ok := getOp(f.st, c.Tenant, a.ID); ok {
		if o.ParamsDigest != a.ParamsDigest {
			return fail(CodeIdempotencyMismatch, fmt.Sprintf("op %q exists with another params_digest", a.ID),
				map[string]any{"params_digest": o.ParamsDigest})
		}
		return okValue(OutcomeOK, o)
	}
	o := &Op{Tenant: c.Tenant, ID: a.ID, Kind: a.Kind, ParamsDigest: a.ParamsDigest, TaskID: a.TaskID,
		State: OpStarted, CreatedAt: ctx.now, UpdatedAt: ctx.now}
	f.putOp(o)
	return okValue(OutcomeCreated, o)
}

func applyOpFinish(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a OpFinishArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	o, ok := getOp(f.st, c.Tenant, a.ID)
	if !ok {
		return fail(CodeNotFound, fmt.Sprintf("op %q not found", a.ID), nil)
	}
	if o.Terminal() {
		if o.State == a.State && bytes.Equal(o.Result, a.Result) {
			return okValue(OutcomeOK, o) // a retry of the same finish
		}
		return fail(CodeVersionMismatch, fmt.Sprintf("op %q already %s; it never changes again", a.ID, o.State),
			map[string]any{"current_state": o.State})
	}
	o.State, o.Result, o.UpdatedAt = a.State, a.Result, ctx.now
	f.putOp(o)
	return okValue(OutcomeOK, o)
}

// GetOp returns an op record.
func (f *FSM) GetOp(tenant, id string) (*Op, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	o, ok := getOp(f.st, tenant, id)
	return o, f.applied, ok
}

func (a *OpFinishArgs) jsonFields() [][]byte { return [][]byte{a.Result} }
