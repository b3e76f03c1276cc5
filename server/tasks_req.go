package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"regexp"

	"github.com/baton-dev/baton/fsm"
)

// Request bodies of the task endpoints (docs/api.md "Tasks").
type taskCreateRequest struct {
	TaskID   string          `json:"task_id"`
	Queue    string          `json:"queue"`
	Status   string          `json:"status"`
	Priority int64           `json:"priority"`
	Payload  json.RawMessage `json:"payload"`
}

type taskClaimRequest struct {
	Owner         string  `json:"owner"`
	LeaseMs       int64   `json:"lease_ms"`
	ExpectStatus  *string `json:"expect_status"`
	ExpectVersion *uint64 `json:"expect_version"`
	SetStatus     *string `json:"set_status"`
}

type queueClaimRequest struct {
	Owner     string   `json:"owner"`
	LeaseMs   int64    `json:"lease_ms"`
	Statuses  []string `json:"statuses"`
	SetStatus *string  `json:"set_status"`
	WaitMs    int64    `json:"wait_ms"`
}

type taskRenewRequest struct {
	FencingToken *uint64 `json:"fencing_token"`
	LeaseMs      int64   `json:"lease_ms"`
}

type taskUpdateRequest struct {
	FencingToken  *uint64         `json:"fencing_token"`
	ExpectVersion *uint64         `json:"expect_version"`
	ExpectStatus  *string         `json:"expect_status"`
	Status        *string         `json:"status"`
	ArtifactID    *string         `json:"artifact_id"`
	Result        json.RawMessage `json:"result"`
	Payload       json.RawMessage `json:"payload"`
	Release       bool            `json:"release"`
}

const (
	maxLeaseMs = 24 * 60 * 60 * 1000
	maxWaitMs  = 60 * 1000
)

var (
	statusRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

func validStatus(what, s string) error {
	if !statusRE.MatchString(s) {
		return badRequest("%s %q must match [a-z][a-z0-9_-]{0,63}", what, s)
	}
	return nil
}

func validOptStatus(what string, s *string) error {
	if s == nil {
		return nil
	}
	return validStatus(what, *s)
}

func validLease(ms int64) error {
	if ms <= 0 || ms > maxLeaseMs {
		return badRequest("lease_ms must be between 1 and %d (24 h), not %d", maxLeaseMs, ms)
	}
	return nil
}

// compactJSON validates and compacts an optional JSON value; nil if absent.
func compactJSON(what string, v json.RawMessage) ([]byte, error) {
	if len(v) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return nil, badRequest("%s is not valid JSON: %v", what, err)
	}
	return b.Bytes(), nil
}

func newTaskID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "task-" + hex.EncodeToString(b)
}

func (req *taskCreateRequest) args() (*fsm.TaskCreateArgs, error) {
	if req.TaskID == "" {
		req.TaskID = newTaskID()
	}
	if err := validName("task_id", req.TaskID); err != nil {
		return nil, err
	}
	if err := validName("queue", req.Queue); err != nil {
		return nil, err
	}
	if req.Status != "" {
		if err := validStatus("status", req.Status); err != nil {
			return nil, err
		}
	}
	payload, err := compactJSON("payload", req.Payload)
	if err != nil {
		return nil, err
	}
	return &fsm.TaskCreateArgs{ID: req.TaskID, Queue: req.Queue, Status: req.Status, Priority: req.Priority, Payload: payload}, nil
}

func (req *taskClaimRequest) args(id string) (*fsm.TaskClaimArgs, error) {
	if err := validName("owner", req.Owner); err != nil {
		return nil, err
	}
	if err := validLease(req.LeaseMs); err != nil {
		return nil, err
	}
	if err := validOptStatus("expect_status", req.ExpectStatus); err != nil {
		return nil, err
	}
	if err := validOptStatus("set_status", req.SetStatus); err != nil {
		return nil, err
	}
	return &fsm.TaskClaimArgs{ID: id, Owner: req.Owner, LeaseMs: req.LeaseMs, ExpectStatus: req.ExpectStatus,
		ExpectVersion: req.ExpectVersion, SetStatus: req.SetStatus}, nil
}

func (req *queueClaimRequest) args(queue string) (*fsm.QueueClaimArgs, error) {
	if err := validName("queue", queue); err != nil {
		return nil, err
	}
	if err := validName("owner", req.Owner); err != nil {
		return nil, err
	}
	if err := validLease(req.LeaseMs); err != nil {
		return nil, err
	}
	if req.WaitMs < 0 || req.WaitMs > maxWaitMs {
		return nil, badRequest("wait_ms must be between 0 and %d, not %d", maxWaitMs, req.WaitMs)
	}
	if len(req.Statuses) == 0 {
		req.Statuses = []string{"pending"}
	}
	if len(req.Statuses) > 16 {
		return nil, badRequest("at most 16 statuses")
	}
	for _, st := range req.Statuses {
		if err := validStatus("statuses[]", st); err != nil {
			return nil, err
		}
	}
	if err := validOptStatus("set_status", req.SetStatus); err != nil {
		return nil, err
	}
	return &fsm.QueueClaimArgs{Queue: queue, Owner: req.Owner, LeaseMs: req.LeaseMs, Statuses: req.Statuses,
		SetStatus: req.SetStatus}, nil
}

func (req *taskRenewRequest) args(id string) (*fsm.TaskRenewArgs, error) {
	if req.FencingToken == nil {
		return nil, badRequest("fencing_token is required")
	}
	if err := validLease(req.LeaseMs); err != nil {
		return nil, err
	}
	return &fsm.TaskRenewArgs{ID: id, FencingToken: *req.FencingToken, LeaseMs: req.LeaseMs}, nil
}

func (req *taskUpdateRequest) args(id string) (*fsm.TaskUpdateArgs, error) {
	if err := validOptStatus("status", req.Status); err != nil {
		return nil, err
	}
	if err := validOptStatus("expect_status", req.ExpectStatus); err != nil {
		return nil, err
	}
	if req.ArtifactID != nil && *req.ArtifactID != "" && !digestRE.MatchString(*req.ArtifactID) {
		return nil, badRequest("artifact_id %q must be \"\" or sha256:<64 lowercase hex>", *req.ArtifactID)
	}
	result, err := compactJSON("result", req.Result)
	if err != nil {
		return nil, err
	}
	payload, err := compactJSON("payload", req.Payload)
	if err != nil {
		return nil, err
	}
	return &fsm.TaskUpdateArgs{ID: id, FencingToken: req.FencingToken, ExpectVersion: req.ExpectVersion,
		ExpectStatus: req.ExpectStatus, Status: req.Status, ArtifactID: req.ArtifactID, Result: result,
		Payload: payload, Release: req.Release}, nil
}
