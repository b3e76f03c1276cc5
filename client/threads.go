package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// CopyThread copies every checkpoint and pending write of thread source,
// in every namespace, to thread target, which must have none
// (ErrAlreadyExists otherwise), in one write (LangGraph's copy_thread). It
// returns how many checkpoints were copied. fence may be nil.
func (c *Client) CopyThread(ctx context.Context, tenant, source, target string, fence *Fence, opts ...RequestOption) (int, error) {
	if err := required("tenant", tenant, "source thread", source, "target thread", target); err != nil {
		return 0, err
	}
	var out struct {
		Checkpoints int `json:"checkpoints"`
	}
	_, err := c.Do(ctx, http.MethodPost, checkpointPath(tenant, source, "", "copy"), wire.ThreadCopy{Target: target, Fence: fence}, &out, opts...)
	return out.Checkpoints, err
}

// PruneThreads prunes threads (LangGraph's prune): with keepLatest, every
// namespace of each keeps only its newest checkpoint, with its pending
// writes; without, the threads are deleted. Threads without checkpoints
// are passed over. It returns how many checkpoints were deleted.
func (c *Client) PruneThreads(ctx context.Context, tenant string, threads []string, keepLatest bool, opts ...RequestOption) (int, error) {
	if err := required("tenant", tenant); err != nil {
		return 0, err
	}
	req := wire.ThreadPrune{Threads: threads, Strategy: "delete"}
	if keepLatest {
		req.Strategy = "keep_latest"
	}
	if req.Threads == nil {
		req.Threads = []string{}
	}
	var out struct {
		Deleted int `json:"deleted"`
	}
	_, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "checkpoints", "prune"), req, &out, opts...)
	return out.Deleted, err
}

// DeleteRuns deletes, in every thread of the tenant, the checkpoints whose
// metadata's run_id is one of runIDs, with their pending writes
// (LangGraph's delete_for_runs); a namespace whose newest checkpoint goes
// has the newest one left as its head. It needs a checkpoints delete grant
// on every thread. It returns how many checkpoints were deleted.
func (c *Client) DeleteRuns(ctx context.Context, tenant string, runIDs []string, opts ...RequestOption) (int, error) {
	if err := required("tenant", tenant); err != nil {
		return 0, err
	}
	if runIDs == nil {
		runIDs = []string{}
	}
	var out struct {
		Deleted int `json:"deleted"`
	}
	_, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "checkpoints", "delete-runs"), wire.DeleteRuns{RunIDs: runIDs}, &out, opts...)
	return out.Deleted, err
}

// CheckpointPolicy bounds the checkpoints of the threads whose id starts
// with Prefix (the longest matching prefix wins): KeepLast keeps a
// namespace's newest checkpoints, deleting older ones as checkpoints are
// put; MaxAge deletes a checkpoint that long after its put (by the
// leader's clock), heads included. Zero sets no bound of its kind.
type CheckpointPolicy struct {
	Prefix   string
	KeepLast uint64
	MaxAge   time.Duration
}

type checkpointPolicyWire struct {
	Prefix   string `json:"prefix"`
	KeepLast uint64 `json:"keep_last"`
	MaxAgeMs int64  `json:"max_age_ms"`
}

// MarshalJSON encodes the policy as the API does, MaxAge as max_age_ms.
func (p CheckpointPolicy) MarshalJSON() ([]byte, error) {
	return json.Marshal(checkpointPolicyWire{Prefix: p.Prefix, KeepLast: p.KeepLast, MaxAgeMs: p.MaxAge.Milliseconds()})
}

func (w checkpointPolicyWire) policy() CheckpointPolicy {
	return CheckpointPolicy{Prefix: w.Prefix, KeepLast: w.KeepLast, MaxAge: time.Duration(w.MaxAgeMs) * time.Millisecond}
}

// SetCheckpointPolicy sets the retention policy of a thread-id prefix; a
// policy with both bounds zero clears it. It takes the admin token or a
// grant with checkpoints write and delete covering the prefix, and applies
// to checkpoints put from then on.
func (c *Client) SetCheckpointPolicy(ctx context.Context, tenant string, p CheckpointPolicy, opts ...RequestOption) (*CheckpointPolicy, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	var out checkpointPolicyWire
	body := wire.CheckpointPolicy{Prefix: &p.Prefix, KeepLast: p.KeepLast, MaxAgeMs: p.MaxAge.Milliseconds()}
	if _, err := c.Do(ctx, http.MethodPut, tenantPath(tenant, "checkpoint-policies"), body, &out, opts...); err != nil {
		return nil, err
	}
	got := out.policy()
	return &got, nil
}

// ListCheckpointPolicies returns a tenant's checkpoint policies in prefix
// order.
func (c *Client) ListCheckpointPolicies(ctx context.Context, tenant string, opts ...RequestOption) ([]CheckpointPolicy, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	var out struct {
		Policies []checkpointPolicyWire `json:"policies"`
	}
	if _, err := c.Do(ctx, http.MethodGet, tenantPath(tenant, "checkpoint-policies"), nil, &out, opts...); err != nil {
		return nil, err
	}
	list := make([]CheckpointPolicy, len(out.Policies))
	for i, w := range out.Policies {
		list[i] = w.policy()
	}
	return list, nil
}

// ListTenantCheckpointsOptions selects the checkpoints of
// ListTenantCheckpoints; nil Thread or NS do not filter.
type ListTenantCheckpointsOptions struct {
	Thread *string // one thread; nil: every thread the caller may read
	NS     *string // one namespace ("" the default one); nil: every namespace
	// BeforeID keeps the checkpoints whose id sorts before it (LangGraph's
	// before, on time-ordered ids); "": all.
	BeforeID      string
	Filter        map[string]any // metadata members to match, as ListCheckpoints'
	Limit         int            // at most this many; 0: the server's page size (100)
	PendingWrites bool           // each checkpoint with its pending writes
}

// ListTenantCheckpoints lists checkpoints across threads and namespaces
// (LangGraph's list with no thread_id or no checkpoint_ns): by thread,
// then namespace, newest first within a namespace, following the server's
// page tokens until it has Limit (100 when 0) or the list ends. Data held
// in chunks is read checkpoint by checkpoint, as ListCheckpoints does.
func (c *Client) ListTenantCheckpoints(ctx context.Context, tenant string, f ListTenantCheckpointsOptions, opts ...RequestOption) ([]Checkpoint, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	q := url.Values{}
	if f.Thread != nil {
		q.Set("thread", *f.Thread)
	}
	if f.NS != nil {
		q.Set("checkpoint_ns", *f.NS)
	}
	setIf(q, "before_id", f.BeforeID)
	if f.PendingWrites {
		q.Set("pending_writes", "true")
	}
	if len(f.Filter) > 0 {
		b, err := json.Marshal(f.Filter)
		if err != nil {
			return nil, fmt.Errorf("%w: filter: %v", ErrInvalidArgument, err)
		}
		q.Set("filter", string(b))
	}
	want := f.Limit
	if want <= 0 {
		want = defaultCheckpointListLimit
	}
	list := []Checkpoint{}
	for {
		q.Set("limit", strconv.Itoa(want-len(list)))
		var out struct {
			Checkpoints   []Checkpoint `json:"checkpoints"`
			NextPageToken string       `json:"next_page_token"`
		}
		if _, err := c.Do(ctx, http.MethodGet, withQuery(tenantPath(tenant, "checkpoints"), q), nil, &out, opts...); err != nil {
			return nil, err
		}
		list = append(list, out.Checkpoints...)
		if len(list) >= want || out.NextPageToken == "" {
			break
		}
		q.Set("page_token", out.NextPageToken)
	}
	for i := range list {
		cp := &list[i]
		if len(cp.DataChunks) == 0 {
			continue
		}
		full, err := c.GetCheckpointNS(ctx, tenant, cp.ThreadID, cp.CheckpointNS, cp.CheckpointID, opts...)
		if err != nil {
			return nil, fmt.Errorf("reading the data of checkpoint %s: %w", cp.CheckpointID, err)
		}
		cp.Data = full.Data
	}
	return list, nil
}
