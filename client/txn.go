package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// TxnOp is one operation of a transaction. On the wire it is the JSON
// object of Body with "op": Op added, e.g.
// {"op": "task.update", "task_id": "t1", "fencing_token": 7, "status": "done"}.
// Body must encode as a JSON object (or be nil). The constructors below
// build the ops docs/api.md names; the path parameters of the equivalent single
// request travel as fields: task_id, ref, namespace and key.
type TxnOp struct {
	Op   string
	Body any
}

// MarshalJSON encodes the op as one flat object.
func (op TxnOp) MarshalJSON() ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if op.Body != nil {
		data, err := json.Marshal(op.Body)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &fields); err != nil {
			return nil, fmt.Errorf("txn op %q: body must be a JSON object: %w", op.Op, err)
		}
	}
	kind, _ := json.Marshal(op.Op)
	fields["op"] = kind
	return json.Marshal(fields)
}

// PutKVRequest is the body of PutKV and of a kv.put op. ExpectVersion 0
// means the key must not exist; nil means no expectation. TTL 0 means the
// entry never expires; otherwise it travels as whole milliseconds (ttl_ms).
type PutKVRequest struct {
	Value         json.RawMessage `json:"value"`
	ExpectVersion *uint64         `json:"expect_version,omitempty"`
	TTL           time.Duration   `json:"-"`
	Fence         *Fence          `json:"fence,omitempty"`
}

// invalidBody is the body of an op its constructor refused: encoding it
// fails with the reason.
type invalidBody struct{ err error }

func (b invalidBody) MarshalJSON() ([]byte, error) { return nil, b.err }

// TxnCreateTask is a task.create op.
func TxnCreateTask(req CreateTaskRequest) TxnOp {
	w, err := req.wire()
	if err != nil {
		return TxnOp{Op: "task.create", Body: invalidBody{err}}
	}
	return TxnOp{Op: "task.create", Body: wire.TxnTaskCreate{TaskCreate: w}}
}

// TxnUpdateTask is a task.update op.
func TxnUpdateTask(taskID string, req UpdateTaskRequest) TxnOp {
	w, err := req.wire()
	if err != nil {
		return TxnOp{Op: "task.update", Body: invalidBody{err}}
	}
	return TxnOp{Op: "task.update", Body: wire.TxnTaskUpdate{TaskID: taskID, TaskUpdate: w}}
}

// TxnClaimTask is a task.claim op.
func TxnClaimTask(taskID string, req ClaimRequest) TxnOp {
	return TxnOp{Op: "task.claim", Body: wire.TxnTaskClaim{TaskID: taskID, TaskClaim: req.wire()}}
}

// TxnSetRef is a ref.set op. A request that both expects the ref absent
// and names an artifact fails the Txn call before anything is sent.
func TxnSetRef(ref string, req SetRefRequest) TxnOp {
	w, err := req.wire()
	if err != nil {
		return TxnOp{Op: "ref.set", Body: invalidBody{err}}
	}
	return TxnOp{Op: "ref.set", Body: wire.TxnRefSet{Ref: ref, RefSet: w}}
}

// TxnPutKV is a kv.put op.
func TxnPutKV(namespace, key string, req PutKVRequest) TxnOp {
	return TxnOp{Op: "kv.put", Body: wire.TxnKVPut{Namespace: namespace, Key: key, KVPut: req.wire()}}
}

// TxnDeleteKV is a kv.delete op; expectVersion and fence may be nil.
func TxnDeleteKV(namespace, key string, expectVersion *uint64, fence *Fence) TxnOp {
	return TxnOp{Op: "kv.delete", Body: wire.TxnKVDelete{Namespace: namespace, Key: key, ExpectVersion: expectVersion, Fence: fence}}
}

// Txn applies ops all or nothing and returns one result per op. When an op
// fails, nothing is applied and the *Error is that op's, with OpIndex set.
func (c *Client) Txn(ctx context.Context, tenant string, ops []TxnOp, opts ...RequestOption) ([]json.RawMessage, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	in := wire.Txn{Ops: make([]json.RawMessage, len(ops))}
	for i, op := range ops {
		b, err := json.Marshal(op)
		if err != nil {
			return nil, fmt.Errorf("encode txn op %d: %w", i, err)
		}
		in.Ops[i] = b
	}
	var out struct {
		Results []json.RawMessage `json:"results"`
	}
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "txn"), in, &out, opts...); err != nil {
		return nil, err
	}
	return out.Results, nil
}
