package client

import (
	"context"
	"net/http"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// ClaimNextRequest is the queue claim UpdateTaskClaimNext makes in the
// update's command: QueueClaimRequest's fields with the queue, and no
// wait. Lease travels as whole milliseconds (lease_ms).
type ClaimNextRequest struct {
	Queue     string
	Owner     string
	Lease     time.Duration
	Statuses  []string
	SetStatus *string
}

// UpdateTaskClaimNext applies req to task id as UpdateTask does and, in the
// same command, claims the best task of next.Queue as ClaimQueue does
// (without waiting): a worker finishes its task and takes the next in one
// round trip. It returns the updated task and the claimed one, with its
// own fencing token and lease, or nil when nothing was claimable. When the
// update is refused (ErrFenced, ErrLeaseHeld, ...) nothing is claimed.
func (c *Client) UpdateTaskClaimNext(ctx context.Context, tenant, id string, req UpdateTaskRequest, next ClaimNextRequest, opts ...RequestOption) (*Task, *Task, error) {
	if err := required("tenant", tenant, "task id", id, "queue", next.Queue, "owner", next.Owner); err != nil {
		return nil, nil, err
	}
	u, err := req.wire()
	if err != nil {
		return nil, nil, err
	}
	body := wire.TaskUpdateClaim{TaskUpdate: u, ClaimNext: &wire.ClaimNext{Queue: next.Queue, Owner: next.Owner,
		LeaseMs: next.Lease.Milliseconds(), Statuses: next.Statuses, SetStatus: next.SetStatus}}
	var out struct {
		Task Task  `json:"task"`
		Next *Task `json:"next"` // null: nothing claimable
	}
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "tasks", id, "update"), body, &out, opts...); err != nil {
		return nil, nil, err
	}
	return &out.Task, out.Next, nil
}
