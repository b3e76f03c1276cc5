package client

import (
	"context"
	"net/http"

	"github.com/baton-dev/baton/client/wire"
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
