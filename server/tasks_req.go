package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	mrand "math/rand/v2"
	"regexp"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// The request bodies of the task endpoints (docs/api.md "Tasks") are
// wire.TaskCreate, wire.TaskClaim, ...; each function below validates one
// and turns it into its command's args.

// resolveAvailability returns the Unix ms time and delay for the FSM
// (which resolves the delay against the command's time).
func resolveAvailability(a wire.Availability) (at, delayMs int64, err error) {
	if a.DelayMs < 0 || a.DelayMs > maxDelayMs {
		return 0, 0, badRequest("delay_ms must be between 0 and %d (1 year), not %d", maxDelayMs, a.DelayMs)
	}
	if a.AvailableAt == "" {
		return 0, a.DelayMs, nil
	}
	if a.DelayMs != 0 {
		return 0, 0, badRequest("give available_at or delay_ms, not both")
	}
	ts, perr := time.Parse(time.RFC3339Nano, a.AvailableAt)
	if perr != nil || ts.UnixMilli() <= 0 {
		return 0, 0, badRequest("available_at %q is not an RFC 3339 time after 1970", a.AvailableAt)
	}
	return ts.UnixMilli(), 0, nil
}

func availabilitySet(a wire.Availability) bool { return a.AvailableAt != "" || a.DelayMs != 0 }

const (
	maxLeaseMs = 24 * 60 * 60 * 1000
	maxWaitMs  = 60 * 1000
	// Lifecycle bounds.
	maxDelayMs       = 365 * 24 * 60 * 60 * 1000
	maxAttemptsLimit = 1000
	maxBackoffMs     = 24 * 60 * 60 * 1000
	maxErrorBytes    = 4096
	// maxRetentionMs bounds a retention period: 10 years.
	maxRetentionMs = 10 * 365 * 24 * 60 * 60 * 1000
)

// validRetention checks a retention period (0: none, or the queue's).
func validRetention(ms int64) error {
	if ms < 0 || ms > maxRetentionMs {
		return badRequest("retention_ms must be between 0 and %d (10 years), not %d", int64(maxRetentionMs), ms)
	}
	return nil
}

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

func taskCreateArgs(req *wire.TaskCreate) (*fsm.TaskCreateArgs, error) {
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
	if err := validBackoff(req.MaxAttempts, req.BackoffInitialMs, req.BackoffMaxMs); err != nil {
		return nil, err
	}
	at, delay, err := resolveAvailability(req.Availability)
	if err != nil {
		return nil, err
	}
	if err := validRetention(req.RetentionMs); err != nil {
		return nil, err
	}
	if err := validDependsOn(req.TaskID, req.DependsOn, req.DependencyPolicy); err != nil { // deps.go
		return nil, err
	}
	if req.ConcurrencyKey != "" {
		if err := validName("concurrency_key", req.ConcurrencyKey); err != nil {
			return nil, err
		}
	}
	var priority int64
	if req.Priority != nil {
		priority = *req.Priority
	}
	return &fsm.TaskCreateArgs{ID: req.TaskID, Queue: req.Queue, Status: req.Status, Priority: priority, Payload: payload,
		MaxAttempts: req.MaxAttempts, BackoffInitialMs: req.BackoffInitialMs, BackoffMaxMs: req.BackoffMaxMs,
		AvailableAt: at, DelayMs: delay, RetentionMs: req.RetentionMs, DependsOn: req.DependsOn, DepPolicy: req.DependencyPolicy,
		ConcurrencyKey: req.ConcurrencyKey}, nil
}

// notDead refuses the reserved status where a caller names a status to claim.
func notDead(what string, s *string) error {
	if s != nil && *s == fsm.StatusDead {
		return badRequest("%s may not be %q: dead tasks are revived with retry", what, fsm.StatusDead)
	}
	return nil
}

func taskFailArgs(req *wire.TaskFail, id string) (*fsm.TaskFailArgs, error) {
	if req.FencingToken == nil {
		return nil, badRequest("fencing_token is required")
	}
	if req.Status != "" {
		if err := validStatus("status", req.Status); err != nil {
			return nil, err
		}
		if err := notDead("status", &req.Status); err != nil {
			return nil, err
		}
	}
	if len(req.Error) > maxErrorBytes {
		return nil, badRequest("error is %d bytes; at most %d", len(req.Error), maxErrorBytes)
	}
	// The backoff's jitter: drawn here, on the leader, into the command.
	return &fsm.TaskFailArgs{ID: id, FencingToken: *req.FencingToken, Error: req.Error, NonRetryable: req.NonRetryable,
		Status: req.Status, Rand: mrand.Uint64()}, nil
}

func taskRetryArgs(req *wire.TaskRetry, id string) (*fsm.TaskRetryArgs, error) {
	if req.Status != "" {
		if err := validStatus("status", req.Status); err != nil {
			return nil, err
		}
		if err := notDead("status", &req.Status); err != nil {
			return nil, err
		}
	}
	at, delay, err := resolveAvailability(req.Availability)
	if err != nil {
		return nil, err
	}
	return &fsm.TaskRetryArgs{ID: id, ExpectVersion: req.ExpectVersion, Status: req.Status, AvailableAt: at, DelayMs: delay}, nil
}

func taskClaimArgs(req *wire.TaskClaim, id string) (*fsm.TaskClaimArgs, error) {
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
	if err := notDead("set_status", req.SetStatus); err != nil {
		return nil, err
	}
	return &fsm.TaskClaimArgs{ID: id, Owner: req.Owner, LeaseMs: req.LeaseMs, ExpectStatus: req.ExpectStatus,
		ExpectVersion: req.ExpectVersion, SetStatus: req.SetStatus}, nil
}

func queueClaimArgs(req *wire.QueueClaim, queue string) (*fsm.QueueClaimArgs, error) {
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
		if err := notDead("statuses[]", &st); err != nil {
			return nil, err
		}
	}
	if err := validOptStatus("set_status", req.SetStatus); err != nil {
		return nil, err
	}
	if err := notDead("set_status", req.SetStatus); err != nil {
		return nil, err
	}
	if req.Max < 0 || req.Max > fsm.MaxClaimBatch {
		return nil, badRequest("max must be between 1 and %d, not %d", fsm.MaxClaimBatch, req.Max)
	}
	return &fsm.QueueClaimArgs{Queue: queue, Owner: req.Owner, LeaseMs: req.LeaseMs, Statuses: req.Statuses,
		SetStatus: req.SetStatus, Max: req.Max}, nil
}

func taskRenewArgs(req *wire.TaskRenew, id string) (*fsm.TaskRenewArgs, error) {
	if req.FencingToken == nil {
		return nil, badRequest("fencing_token is required")
	}
	if err := validLease(req.LeaseMs); err != nil {
		return nil, err
	}
	return &fsm.TaskRenewArgs{ID: id, FencingToken: *req.FencingToken, LeaseMs: req.LeaseMs}, nil
}

func taskUpdateArgs(req *wire.TaskUpdate, id string) (*fsm.TaskUpdateArgs, error) {
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
	release := req.Release != nil && *req.Release
	if availabilitySet(req.Availability) && !release {
		return nil, badRequest("available_at and delay_ms go with release: true")
	}
	if req.Unstarted && (!release || req.FencingToken == nil) {
		return nil, badRequest("unstarted goes with release: true and the lease's fencing_token")
	}
	if req.Unstarted && (req.Status != nil || req.Result != nil || req.Payload != nil || req.ArtifactID != nil) {
		return nil, badRequest("unstarted gives the task back as it was claimed: no status, result, payload or artifact_id")
	}
	at, delay, err := resolveAvailability(req.Availability)
	if err != nil {
		return nil, err
	}
	return &fsm.TaskUpdateArgs{AvailableAt: at, DelayMs: delay, ID: id, FencingToken: req.FencingToken, ExpectVersion: req.ExpectVersion,
		ExpectStatus: req.ExpectStatus, Status: req.Status, ArtifactID: req.ArtifactID, Result: result,
		Payload: payload, Release: release, Unstarted: req.Unstarted}, nil
}

func queuePolicyArgs(req *wire.QueuePolicy, queue string) (*fsm.QueuePolicyArgs, error) {
	if err := validBackoff(req.MaxAttempts, req.BackoffInitialMs, req.BackoffMaxMs); err != nil {
		return nil, err
	}
	if err := validRetention(req.RetentionMs); err != nil {
		return nil, err
	}
	if err := validFlow(req); err != nil { // flow.go
		return nil, err
	}
	return &fsm.QueuePolicyArgs{Queue: queue, Policy: fsm.QueuePolicy{MaxAttempts: req.MaxAttempts,
		BackoffInitialMs: req.BackoffInitialMs, BackoffMaxMs: req.BackoffMaxMs, RetentionMs: req.RetentionMs,
		MaxLeased: req.MaxLeased, ClaimsPerSecond: req.ClaimsPerSecond, ClaimBurst: req.ClaimBurst, KeyLimit: req.ConcurrencyKeyLimit}}, nil
}

// validBackoff checks max_attempts and the backoff bounds (0: default).
func validBackoff(maxAttempts uint64, initial, maxMs int64) error {
	if maxAttempts > maxAttemptsLimit {
		return badRequest("max_attempts must be between 0 (unlimited) and %d, not %d", maxAttemptsLimit, maxAttempts)
	}
	for _, b := range []struct {
		name string
		v    int64
	}{{"backoff_initial_ms", initial}, {"backoff_max_ms", maxMs}} {
		if b.v < 0 || b.v > maxBackoffMs {
			return badRequest("%s must be between 0 (the default) and %d (24 h), not %d", b.name, maxBackoffMs, b.v)
		}
	}
	if maxMs != 0 && maxMs < initial {
		return badRequest("backoff_max_ms (%d) is below backoff_initial_ms (%d)", maxMs, initial)
	}
	return nil
}
