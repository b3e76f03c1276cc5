package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// QueueStats are a queue's statistics (docs/api.md "Queues"), as of AsOf,
// the time of the newest command the cluster applied: every figure comes
// from command times, none from a node's clock.
type QueueStats struct {
	Queue    string           `json:"queue"`
	Tasks    int64            `json:"tasks"`
	ByStatus map[string]int64 `json:"by_status"`
	// Waiting counts the tasks in status pending without a lease; DueLater
	// those of them whose available_at is after AsOf.
	Waiting  int64 `json:"waiting"`
	DueLater int64 `json:"due_later"`
	Dead     int64 `json:"dead"`
	// Running counts the tasks under a lease live at AsOf, whatever their
	// status; LeaseExpired those with an owner whose lease ran out.
	Running      int64 `json:"running"`
	LeaseExpired int64 `json:"lease_expired"`
	// Blocked counts the tasks without a lease that wait on dependencies.
	Blocked int64 `json:"blocked"`
	// OldestPendingAt is when the oldest claimable waiting task became
	// claimable (nil: none is); OldestPendingAgeMs is AsOf minus that.
	OldestPendingAt    *time.Time `json:"oldest_pending_at"`
	OldestPendingAgeMs int64      `json:"oldest_pending_age_ms"`
	// ClaimsPerMinute counts the claims of the 60 seconds up to AsOf.
	ClaimsPerMinute int64     `json:"claims_per_minute"`
	AsOf            time.Time `json:"as_of"`
}

// OldestPendingAge is OldestPendingAgeMs as a duration.
func (s *QueueStats) OldestPendingAge() time.Duration {
	return time.Duration(s.OldestPendingAgeMs) * time.Millisecond
}

// QueueList is one page of ListQueues. NextPageToken is empty on the last
// page; a page that is empty but has one ended at the server's walk bound
// (10,000 queues examined, visible or not): keep going.
type QueueList struct {
	Queues        []QueueStats `json:"queues"`
	NextPageToken string       `json:"next_page_token"`
}

// ListQueuesOptions pages ListQueues; zero fields take the server's
// defaults (100 a page, from the first).
type ListQueuesOptions struct {
	Limit     int
	PageToken string
}

// GetQueueStats returns a queue's statistics; a queue without tasks has
// zeros.
func (c *Client) GetQueueStats(ctx context.Context, tenant, queue string, opts ...RequestOption) (*QueueStats, error) {
	if err := required("tenant", tenant, "queue", queue); err != nil {
		return nil, err
	}
	var out QueueStats
	if _, err := c.Do(ctx, http.MethodGet, tenantPath(tenant, "queues", queue), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListQueues returns one page of the tenant's queues that hold tasks, in
// name order, with their statistics (only those the caller may read).
func (c *Client) ListQueues(ctx context.Context, tenant string, o ListQueuesOptions, opts ...RequestOption) (*QueueList, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	q := url.Values{}
	setIf(q, "page_token", o.PageToken)
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	var out QueueList
	if _, err := c.Do(ctx, http.MethodGet, withQuery(tenantPath(tenant, "queues"), q), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}
