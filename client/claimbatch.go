package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// MaxClaimBatch is the most tasks one batch claim may take, and
// MaxBatchUpdates the most updates of one QueueBatch (docs/api.md).
const (
	MaxClaimBatch   = 64
	MaxBatchUpdates = 64
)

// ClaimQueueBatch claims up to max tasks of queue in one request and one
// replicated command, as that many ClaimQueue calls would one after the
// other (without waiting between them), each task with its own fencing
// token and lease: finish, renew, fail or release each on its own. It
// returns the claimed tasks, best first, or none when nothing was
// claimable within req.Wait. max is 1 to MaxClaimBatch.
func (c *Client) ClaimQueueBatch(ctx context.Context, tenant, queue string, req QueueClaimRequest, max int, opts ...RequestOption) ([]*Task, error) {
	if err := required("tenant", tenant, "queue", queue, "owner", req.Owner); err != nil {
		return nil, err
	}
	if max < 1 || max > MaxClaimBatch {
		return nil, fmt.Errorf("%w: max must be between 1 and %d, not %d", ErrInvalidArgument, MaxClaimBatch, max)
	}
	opts = append(opts, extendTimeout(req.Wait))
	body := wire.QueueClaim{Owner: req.Owner, LeaseMs: req.Lease.Milliseconds(), Statuses: req.Statuses,
		SetStatus: req.SetStatus, WaitMs: req.Wait.Milliseconds(), Max: int64(max)}
	var out struct {
		Tasks []*Task `json:"tasks"`
	}
	meta, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "queues", queue, "claim"), body, &out, opts...)
	if err != nil || meta.Status == http.StatusNoContent {
		return nil, err
	}
	return out.Tasks, nil
}

// BatchUpdate is one update of QueueBatch: UpdateTaskRequest for task ID.
type BatchUpdate struct {
	ID string
	UpdateTaskRequest
}

// BatchClaim is the claim of QueueBatch: up to Max (1 to MaxClaimBatch)
// tasks of the batch's queue, without waiting. Lease travels as whole
// milliseconds (lease_ms).
type BatchClaim struct {
	Owner     string
	Lease     time.Duration
	Statuses  []string
	SetStatus *string
	Max       int
}

// BatchOutcome is the outcome of one update of a QueueBatch: the updated
// task, or the *Error the update alone would have returned (errors.Is
// matches ErrFenced, ErrLeaseHeld, ErrVersionMismatch, ErrNotFound, ...).
type BatchOutcome struct {
	Task *Task
	Err  error
}

// QueueBatch applies updates in order, each as UpdateTask alone would,
// and then, when claim is not nil, claims up to claim.Max tasks of queue
// as ClaimQueueBatch would without waiting, seeing the updates (a
// release frees its max_leased slot): one round trip and one replicated
// command. Each update has its own outcome: a refused one (a stale
// fencing token, ...) writes nothing and does not stop the others. err
// is the whole request's (a bad field, a refused grant: then nothing is
// written), and a request retried under the client's session or an
// Idempotency-Key is applied once.
func (c *Client) QueueBatch(ctx context.Context, tenant, queue string, updates []BatchUpdate, claim *BatchClaim, opts ...RequestOption) ([]BatchOutcome, []*Task, error) {
	if err := required("tenant", tenant, "queue", queue); err != nil {
		return nil, nil, err
	}
	if len(updates) == 0 && claim == nil {
		return nil, nil, fmt.Errorf("%w: a batch has updates or a claim", ErrInvalidArgument)
	}
	if len(updates) > MaxBatchUpdates {
		return nil, nil, fmt.Errorf("%w: a batch has at most %d updates, not %d", ErrInvalidArgument, MaxBatchUpdates, len(updates))
	}
	body := wire.QueueBatch{Updates: make([]wire.BatchUpdate, len(updates))}
	for i, u := range updates {
		if err := required("task id", u.ID); err != nil {
			return nil, nil, err
		}
		w, err := u.wire()
		if err != nil {
			return nil, nil, err
		}
		for _, raw := range []json.RawMessage{w.Result, w.Payload} {
			if len(raw) > 0 && !json.Valid(raw) {
				return nil, nil, fmt.Errorf("%w: updates[%d] (task %q): result and payload must be JSON", ErrInvalidArgument, i, u.ID)
			}
		}
		body.Updates[i] = wire.BatchUpdate{ID: u.ID, TaskUpdate: w}
	}
	if claim != nil {
		if err := required("owner", claim.Owner); err != nil {
			return nil, nil, err
		}
		if claim.Max < 1 || claim.Max > MaxClaimBatch {
			return nil, nil, fmt.Errorf("%w: max must be between 1 and %d, not %d", ErrInvalidArgument, MaxClaimBatch, claim.Max)
		}
		body.Claim = &wire.BatchClaim{Owner: claim.Owner, LeaseMs: claim.Lease.Milliseconds(), Statuses: claim.Statuses,
			SetStatus: claim.SetStatus, Max: int64(claim.Max)}
	}
	var out struct {
		Results []struct {
			Task  *Task           `json:"task"`
			Error json.RawMessage `json:"error"`
		} `json:"results"`
		Next []*Task `json:"next"`
	}
	meta, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "queues", queue, "batch"), body, &out, opts...)
	if err != nil {
		return nil, nil, err
	}
	if len(out.Results) != len(updates) {
		return nil, nil, fmt.Errorf("baton: a batch of %d updates answered %d outcomes", len(updates), len(out.Results))
	}
	outcomes := make([]BatchOutcome, len(updates))
	for i, r := range out.Results {
		if r.Error != nil {
			var code struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal(r.Error, &code)
			status := wire.Status[code.Code]
			if status == 0 {
				status = http.StatusConflict
			}
			outcomes[i].Err = decodeError(status, meta.Index, append(append([]byte(`{"error":`), r.Error...), '}'))
			continue
		}
		outcomes[i].Task = r.Task
	}
	return outcomes, out.Next, nil
}
