package wire

import "encoding/json"

// Request bodies of the API (docs/api.md), each defined once: the server
// decodes them, the SDK encodes them. The SDK's own request types, where
// they differ (durations instead of *_ms fields, plain fields instead of
// tri-state pointers), are converted to these before they are sent.
//
// Pointers are the fields whose absence means something other than their
// zero value; omitempty leaves out what the SDK did not set, and changes
// nothing for the server, which decodes either form.

// Fence guards a write: it applies only if Token is the current fencing
// token of task TaskID in the same tenant, else the write is refused with
// CodeFenced.
type Fence struct {
	TaskID string `json:"task_id"`
	Token  uint64 `json:"token"`
}

// Grant allows a principal the actions on one resource's objects whose
// names start with Prefix. It is also the state machine's stored form of a
// grant, so its fields and tags are part of the replicated format: never
// rename them or add omitempty.
type Grant struct {
	Resource string   `json:"resource"`
	Prefix   string   `json:"prefix"`
	Actions  []string `json:"actions"`
}

// KVPut is the body of PUT /v1/tenants/{t}/kv/{ns}/{key}.
type KVPut struct {
	Value         json.RawMessage `json:"value"`
	ExpectVersion *uint64         `json:"expect_version,omitempty"`
	TTLMs         int64           `json:"ttl_ms,omitempty"` // 0: no expiry
	Fence         *Fence          `json:"fence,omitempty"`
}

// OpBegin is the body of POST /v1/tenants/{t}/ops/{op_id}/begin.
type OpBegin struct {
	Kind         string `json:"kind"`
	ParamsDigest string `json:"params_digest"`
	TaskID       string `json:"task_id,omitempty"`
	Fence        *Fence `json:"fence,omitempty"`
}

// OpFinish is the body of POST /v1/tenants/{t}/ops/{op_id}/finish.
type OpFinish struct {
	State  string          `json:"state"`
	Result json.RawMessage `json:"result,omitempty"`
	Fence  *Fence          `json:"fence,omitempty"`
}

// RefSet is the body of PUT /v1/tenants/{t}/refs/{ref}. ExpectArtifactID
// nil sets the ref unconditionally; "" requires it to be absent.
type RefSet struct {
	ArtifactID       string  `json:"artifact_id"`
	ExpectArtifactID *string `json:"expect_artifact_id,omitempty"`
	Fence            *Fence  `json:"fence,omitempty"`
}

// PrincipalCreate is the body of POST /v1/tenants/{t}/principals.
type PrincipalCreate struct {
	Name   string  `json:"name"`
	Grants []Grant `json:"grants"`
}

// Quota is the body of PUT /v1/tenants/{t}/quota. MaxBytes and MaxKeys
// are required (0: no limit); RatePerSec and Burst, when given, set the
// tenant's request rate limit.
type Quota struct {
	MaxBytes   *int64   `json:"max_bytes"`
	MaxKeys    *int64   `json:"max_keys"`
	RatePerSec *float64 `json:"rate_per_sec,omitempty"`
	Burst      *int64   `json:"burst,omitempty"`
}

// MemberAdd is the body of POST /v1/cluster/members. Voter nil is true.
type MemberAdd struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    *bool  `json:"voter,omitempty"`
}

// Transfer is the body of POST /v1/cluster/transfer-leadership.
type Transfer struct {
	To string `json:"to,omitempty"`
}

// Transaction ops (POST /v1/tenants/{t}/txn): each op is an object with
// "op" naming it and the fields of its request beside it. The SDK leaves
// Op empty and sets "op" itself (client.TxnOp).

// TxnKVPut is a "kv.put" op.
type TxnKVPut struct {
	Op        string `json:"op,omitempty"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	KVPut
}

// TxnKVDelete is a "kv.delete" op.
type TxnKVDelete struct {
	Op            string  `json:"op,omitempty"`
	Namespace     string  `json:"namespace"`
	Key           string  `json:"key"`
	ExpectVersion *uint64 `json:"expect_version,omitempty"`
	Fence         *Fence  `json:"fence,omitempty"`
}

// TxnRefSet is a "ref.set" op.
type TxnRefSet struct {
	Op  string `json:"op,omitempty"`
	Ref string `json:"ref"`
	RefSet
}
