package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// Op states. Started is set by BeginOp; Unknown may later become Succeeded
// or Failed; Succeeded and Failed never change again.
const (
	OpStarted   = "started"
	OpSucceeded = "succeeded"
	OpFailed    = "failed"
	OpUnknown   = "unknown"
)

// Op is the ledger record of one external side effect (a message sent, a
// page published), so that a retry after an uncertain outcome is reconciled
// instead of repeated. Once builds on it.
type Op struct {
	OpID         string          `json:"op_id"`
	Kind         string          `json:"kind"`
	ParamsDigest string          `json:"params_digest"`
	TaskID       string          `json:"task_id"`
	State        string          `json:"state"`
	Result       json.RawMessage `json:"result"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
}

// Terminal reports whether the op's state can never change again.
func (o *Op) Terminal() bool { return o.State == OpSucceeded || o.State == OpFailed }

// BeginOpRequest is the body of BeginOp. ParamsDigest pins the op id to one
// request (see ParamsDigest); TaskID and Fence are optional.
type BeginOpRequest = wire.OpBegin

// FinishOpRequest is the body of FinishOp. State is OpSucceeded, OpFailed
// or OpUnknown.
type FinishOpRequest = wire.OpFinish

// BeginOp records that the action opID is about to run. created is true
// when this call made the record (state started, 201); otherwise op is the
// existing record in whatever state it is (200). The same op id with
// another params digest is ErrIdempotencyMismatch.
func (c *Client) BeginOp(ctx context.Context, tenant, opID string, req BeginOpRequest, opts ...RequestOption) (op *Op, created bool, err error) {
	if err := required("tenant", tenant, "op id", opID, "kind", req.Kind, "params digest", req.ParamsDigest); err != nil {
		return nil, false, err
	}
	var out Op
	meta, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "ops", opID, "begin"), req, &out, opts...)
	if err != nil {
		return nil, false, err
	}
	return &out, meta.Status == http.StatusCreated, nil
}

// FinishOp records the outcome of an op. Finishing a succeeded or failed
// op again with the same state and result is a no-op; anything else on a
// terminal op is ErrVersionMismatch (detail "current_state").
func (c *Client) FinishOp(ctx context.Context, tenant, opID string, req FinishOpRequest, opts ...RequestOption) (*Op, error) {
	if err := required("tenant", tenant, "op id", opID, "state", req.State); err != nil {
		return nil, err
	}
	var out Op
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "ops", opID, "finish"), req, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetOp returns an op's record; ErrNotFound when it was never begun.
func (c *Client) GetOp(ctx context.Context, tenant, opID string, opts ...RequestOption) (*Op, error) {
	if err := required("tenant", tenant, "op id", opID); err != nil {
		return nil, err
	}
	var out Op
	if _, err := c.Do(ctx, http.MethodGet, tenantPath(tenant, "ops", opID), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// ParamsDigest returns "sha256:<hex>" of the canonical JSON of params:
// params encoded as JSON, object keys sorted, no insignificant whitespace,
// no HTML escaping, numbers as written. Equal values give equal digests
// however they were built (a struct, a map, or JSON text with other
// spacing or key order).
func ParamsDigest(params any) (string, error) {
	b, err := canonicalJSON(params)
	if err != nil {
		return "", fmt.Errorf("%w: params: %w", ErrInvalidArgument, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// canonicalJSON encodes v, decodes it into generic values (maps sort their
// keys when encoded again) and encodes it once more.
func canonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}
