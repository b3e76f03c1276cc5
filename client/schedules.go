package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// Catch-up policies of a schedule: which ticks missed while the cluster
// had no leader (or was down) create tasks.
const (
	CatchUpLatest = "latest" // the most recent missed tick only (the default)
	CatchUpAll    = "all"    // every missed tick
	CatchUpSkip   = "skip"   // none: only ticks on time (within a minute)
)

// Schedule creates a task in its queue at every tick of a cron expression
// (in a time zone) or a fixed interval, exactly once per tick; the task's
// id is ScheduleID + ":" + the tick's Unix ms (docs/api.md "Schedules").
type Schedule struct {
	TenantID   string          `json:"tenant_id"`
	ScheduleID string          `json:"schedule_id"`
	Queue      string          `json:"queue"`
	Cron       string          `json:"cron,omitempty"`
	TimeZone   string          `json:"timezone,omitempty"`
	IntervalMs int64           `json:"interval_ms,omitempty"`
	CatchUp    string          `json:"catch_up"`
	Priority   int64           `json:"priority"`
	Payload    json.RawMessage `json:"payload"`
	Paused     bool            `json:"paused"`
	NextAt     time.Time       `json:"next_at"`
	LastTickAt *time.Time      `json:"last_tick_at"`
	Ticks      uint64          `json:"ticks"`
	Version    uint64          `json:"version"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// CreateScheduleRequest is the body of CreateSchedule: Cron (5 fields or
// @hourly ..., in TimeZone, "" is UTC) or IntervalMs (at least 1,000),
// one of them.
type CreateScheduleRequest = wire.ScheduleCreate

// CreateSchedule creates a schedule; ErrInvalidArgument for an invalid
// cron expression or time zone.
func (c *Client) CreateSchedule(ctx context.Context, tenant string, req CreateScheduleRequest, opts ...RequestOption) (*Schedule, error) {
	if err := required("tenant", tenant, "schedule id", req.ScheduleID); err != nil {
		return nil, err
	}
	return c.doSchedule(ctx, http.MethodPost, tenantPath(tenant, "schedules"), req, opts)
}

// GetSchedule reads a schedule.
func (c *Client) GetSchedule(ctx context.Context, tenant, id string, opts ...RequestOption) (*Schedule, error) {
	if err := required("tenant", tenant, "schedule id", id); err != nil {
		return nil, err
	}
	return c.doSchedule(ctx, http.MethodGet, tenantPath(tenant, "schedules", id), nil, opts)
}

// PauseSchedule stops a schedule's ticks; ResumeSchedule starts them again
// from the first tick after now.
func (c *Client) PauseSchedule(ctx context.Context, tenant, id string, opts ...RequestOption) (*Schedule, error) {
	if err := required("tenant", tenant, "schedule id", id); err != nil {
		return nil, err
	}
	return c.doSchedule(ctx, http.MethodPost, tenantPath(tenant, "schedules", id, "pause"), nil, opts)
}

// ResumeSchedule: see PauseSchedule.
func (c *Client) ResumeSchedule(ctx context.Context, tenant, id string, opts ...RequestOption) (*Schedule, error) {
	if err := required("tenant", tenant, "schedule id", id); err != nil {
		return nil, err
	}
	return c.doSchedule(ctx, http.MethodPost, tenantPath(tenant, "schedules", id, "resume"), nil, opts)
}

// DeleteSchedule deletes a schedule; the tasks it created stay.
func (c *Client) DeleteSchedule(ctx context.Context, tenant, id string, opts ...RequestOption) error {
	if err := required("tenant", tenant, "schedule id", id); err != nil {
		return err
	}
	_, err := c.Do(ctx, http.MethodDelete, tenantPath(tenant, "schedules", id), nil, nil, opts...)
	return err
}

// ScheduleList is one page of ListSchedules; NextPageToken is empty on the
// last page (a page may be empty with one: keep going).
type ScheduleList struct {
	Schedules     []Schedule `json:"schedules"`
	NextPageToken string     `json:"next_page_token"`
}

// ListSchedules returns one page of the tenant's schedules on queues the
// caller may read, in id order (limit 0: the server's default, 100).
func (c *Client) ListSchedules(ctx context.Context, tenant string, limit int, pageToken string, opts ...RequestOption) (*ScheduleList, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	q := url.Values{}
	setIf(q, "page_token", pageToken)
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out ScheduleList
	if _, err := c.Do(ctx, http.MethodGet, withQuery(tenantPath(tenant, "schedules"), q), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) doSchedule(ctx context.Context, method, path string, body any, opts []RequestOption) (*Schedule, error) {
	var out Schedule
	if _, err := c.Do(ctx, method, path, body, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}
