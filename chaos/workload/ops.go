package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/chaos/history"
	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/fsm/wire"
)

// caller makes recorded calls for one client id.
type caller struct {
	w      *Workload
	id     int
	c      *client.Client
	final  bool
	prefix string // of idempotency keys and unique values
	seq    int
	// sessions: the caller's writes carry no Idempotency-Key, so the
	// client's own retries go in its client session.
	sessions bool
	// coord marks the caller's operations as the coordination agents'
	// (history.Input.Coord).
	coord bool
	// claims counts the caller's queue claims: every other one is a
	// batch claim (claimQueue).
	claims int
}

// key is the Idempotency-Key of a write the workload never retries
// itself: none when the caller uses the client's session.
func (k *caller) key(what string) string {
	if k.sessions {
		return ""
	}
	return k.next(what)
}

// next returns a name unique in the run: prefix-<agent>-<n>.
func (k *caller) next(what string) string {
	k.seq++
	return k.prefix + "-" + what + "-" + itoa(k.id) + "-" + itoa(k.seq)
}

func itoa(i int) string { return strconv.Itoa(i) }

type callFunc func(ctx context.Context, opts []client.RequestOption, op *history.Op) (history.Output, error)

// call invokes fn as one recorded operation with Idempotency-Key key (none
// for reads).
func (k *caller) call(kind history.Kind, in history.Input, key string, fn callFunc) history.Op {
	in.Coord = k.coord
	p := k.w.rec.Invoke(k.id, kind, in)
	op := p.Op()
	op.IdemKey, op.Final = key, k.final
	var meta client.Meta
	opts := []client.RequestOption{client.CaptureMeta(&meta)}
	if key != "" {
		opts = append(opts, client.IdempotencyKey(key))
	}
	tr := &answerTrace{}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), traceKey{}, tr), k.w.cfg.OpTimeout)
	out, err := fn(ctx, opts, op)
	cancel()
	op.Index, op.Replay = meta.Index, meta.Replay
	if lost := tr.lost.Load(); lost != nil {
		op.LostAnswer = *lost
		if last := tr.last.Load(); last != nil {
			op.Answer = *last
		}
	}
	outcome, code, msg := Classify(err)
	if err != nil {
		out = withDetails(out, err)
	}
	op.Code, op.Err = code, msg
	return p.End(outcome, out)
}

// Classify maps a client error to an outcome: a definitive answer from the
// server (any status but 5xx) is Fail with its code; a 503 (kept Unknown,
// conservatively), a 504 outcome_unknown, a 5xx, a timeout or a connection
// error is Unknown, since the write may have been applied.
func Classify(err error) (history.Outcome, string, string) {
	if err == nil {
		return history.OK, "", ""
	}
	var e *client.Error
	if errors.As(err, &e) {
		switch {
		case e.Status == http.StatusServiceUnavailable:
			return history.Unknown, "unavailable", err.Error()
		case e.Code == wire.CodeOutcomeUnknown:
			return history.Unknown, wire.CodeOutcomeUnknown, err.Error()
		case e.Status >= 500:
			return history.Unknown, CodeServerError, err.Error()
		case e.Code == "":
			return history.Fail, "http_" + itoa(e.Status), err.Error()
		}
		return history.Fail, e.Code, err.Error()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return history.Unknown, "timeout", err.Error()
	case errors.Is(err, client.ErrUnavailable):
		return history.Unknown, "unavailable", err.Error()
	}
	return history.Unknown, "transport", err.Error()
}

// CodeServerError marks an answer with a 5xx status other than 503 and
// 504 outcome_unknown: a bug by the API's rules, which the runner reports
// as an anomaly.
const CodeServerError = "server_error"

// withDetails copies the details of an error answer into out.
func withDetails(out history.Output, err error) history.Output {
	var e *client.Error
	if !errors.As(err, &e) {
		return out
	}
	if v, ok := e.DetailUint("current_token"); ok {
		out.CurrentToken = &v
	}
	if v, ok := e.DetailUint("current_version"); ok {
		out.CurrentVersion = &v
	}
	if v, ok := e.DetailString("current_head"); ok {
		out.Current = &v
	}
	if e.Code == "version_mismatch" {
		if v, ok := e.DetailString("artifact_id"); ok {
			out.Current = &v
		}
	}
	if v, ok := e.DetailString("owner"); ok {
		out.LeaseOwner = v
	}
	if i, ok := e.OpIndex(); ok {
		out.OpIndex = &i
	}
	return out
}

// jsonText decodes a JSON string value; anything else is returned as its
// JSON text, and null as "".
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	t := strings.TrimSpace(string(raw))
	if t == "null" {
		return ""
	}
	return t
}

func jsonValue(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func taskOutput(t *client.Task) history.Output {
	out := history.Output{Exists: true, Token: t.FencingToken, Owner: t.Owner, Value: jsonText(t.Result), TaskID: t.TaskID,
		Version: t.Version, Status: t.Status, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, UpdatedAtMS: t.UpdatedAt.UnixMilli()}
	if t.LeaseUntil != nil {
		out.LeaseUntil = t.LeaseUntil.UnixMilli()
	}
	if t.AvailableAt != nil {
		out.AvailableAtMS = t.AvailableAt.UnixMilli()
	}
	out.RetentionMS = t.Retention.Milliseconds()
	if t.ExpiresAt != nil {
		out.ExpiresAtMS = t.ExpiresAt.UnixMilli()
	}
	out.CancelRequested, out.DepsLeft, out.ConcurrencyKey = t.CancelRequested, t.DependenciesLeft, t.ConcurrencyKey
	out.CreatedAtMS = t.CreatedAt.UnixMilli()
	out.Parked = t.Parked
	if wp := t.Waitpoint; wp != nil {
		out.Waitpoint, out.WaitState, out.WaitPayload = wp.WaitpointID, wp.State, jsonText(wp.Payload)
	}
	for _, d := range t.Dependencies {
		out.Deps = append(out.Deps, history.Dep{TaskID: d.TaskID, Resolved: d.Resolved, Status: d.Status})
	}
	return out
}

func kvOutput(e *client.KVEntry) history.Output {
	return history.Output{Exists: true, Value: jsonText(e.Value), Version: e.Version}
}

// KV operations. key is "namespace/key".

func splitKey(key string) (string, string) {
	ns, k, _ := strings.Cut(key, "/")
	return ns, k
}

func (k *caller) kvGet(key string) history.Op {
	return k.call(history.KVGet, history.Input{Key: key}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		ns, name := splitKey(key)
		e, err := k.c.GetKV(ctx, k.w.cfg.Tenant, ns, name, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return kvOutput(e), nil
	})
}

func (k *caller) kvPut(key, value string, expect *uint64, fence *client.Fence) history.Op {
	in := history.Input{Key: key, Value: value, ExpectVersion: expect}
	if fence != nil {
		in.FenceTask, in.FenceToken = fence.TaskID, fence.Token
	}
	return k.call(history.KVPut, in, k.key("kv"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		ns, name := splitKey(key)
		e, err := k.c.PutKV(ctx, k.w.cfg.Tenant, ns, name, client.PutKVRequest{Value: jsonValue(value), ExpectVersion: expect, Fence: fence}, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return kvOutput(e), nil
	})
}

func (k *caller) kvDelete(key string, expect *uint64) history.Op {
	return k.call(history.KVDelete, history.Input{Key: key, ExpectVersion: expect}, k.key("del"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		ns, name := splitKey(key)
		return history.Output{}, k.c.DeleteKV(ctx, k.w.cfg.Tenant, ns, name, expect, opts...)
	})
}

func (k *caller) kvList(ns string) history.Op {
	return k.call(history.KVList, history.Input{Key: ns}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		var out history.Output
		page := ""
		for {
			l, err := k.c.ListKV(ctx, k.w.cfg.Tenant, ns, client.ListKVOptions{Limit: 500, PageToken: page}, opts...)
			if err != nil {
				return history.Output{}, err
			}
			for _, e := range l.Entries {
				out.Values = append(out.Values, ns+"/"+e.Key)
			}
			if l.NextPageToken == "" {
				return out, nil
			}
			page = l.NextPageToken
		}
	})
}

// Task operations.

func (k *caller) taskGet(task string) history.Op {
	return k.call(history.TaskGet, history.Input{Key: task}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		t, err := k.c.GetTask(ctx, k.w.cfg.Tenant, task, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

func (k *caller) claim(task, owner string, lease time.Duration) history.Op {
	in := history.Input{Key: task, Owner: owner, LeaseMS: lease.Milliseconds()}
	return k.call(history.TaskClaim, in, k.key("claim"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		t, err := k.c.ClaimTask(ctx, k.w.cfg.Tenant, task, client.ClaimRequest{Owner: owner, Lease: lease}, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

var claimStatuses = []string{"pending", "working"}

func (k *caller) claimQueue(owner string, lease time.Duration) history.Op {
	in := history.Input{Queue: Queue, Owner: owner, LeaseMS: lease.Milliseconds()}
	working := "working"
	// Every other claim is a batch claim (max 1: its one task is what the
	// checkers judge, as a claim's; the answer, compared raw by the
	// idempotency checker, is the batch's list): the batch path (one
	// command of up to max claims, version 6 entries) under the faults.
	k.claims++
	batch := k.claims%2 == 0
	return k.call(history.TaskQueueClaim, in, k.key("qclaim"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		req := client.QueueClaimRequest{Owner: owner, Lease: lease, Statuses: claimStatuses, SetStatus: &working}
		if batch {
			ts, err := k.c.ClaimQueueBatch(ctx, k.w.cfg.Tenant, Queue, req, 1, opts...)
			if err != nil || len(ts) == 0 {
				return history.Output{}, err
			}
			return taskOutput(ts[0]), nil
		}
		t, err := k.c.ClaimQueue(ctx, k.w.cfg.Tenant, Queue, req, opts...)
		if err != nil || t == nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

func (k *caller) renew(task string, token uint64, lease time.Duration) history.Op {
	in := history.Input{Key: task, Token: &token, LeaseMS: lease.Milliseconds()}
	return k.call(history.TaskRenew, in, k.key("renew"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		t, err := k.c.RenewTask(ctx, k.w.cfg.Tenant, task, client.RenewRequest{FencingToken: token, Lease: lease}, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

func (k *caller) update(task string, token uint64, result string, release bool) history.Op {
	return k.updateDelay(task, token, result, release, 0)
}

// updateDelay is update; a release with a delay makes the task claimable
// from the queue only after it.
func (k *caller) updateDelay(task string, token uint64, result string, release bool, delay time.Duration) history.Op {
	in := history.Input{Key: task, Token: &token, Value: result, Release: release, DelayMS: delay.Milliseconds()}
	req := client.UpdateTaskRequest{FencingToken: &token, Result: jsonValue(result), Delay: delay}
	if release {
		req.Release = &release
	}
	return k.updateTask(in, req)
}

// finish releases the task held under token in a terminal status (done):
// with a retention, the purge deletes it once the period has passed.
func (k *caller) finish(task string, token uint64, result, status string) history.Op {
	release := true
	in := history.Input{Key: task, Token: &token, Value: result, Release: true, Status: status}
	return k.updateTask(in, client.UpdateTaskRequest{FencingToken: &token, Result: jsonValue(result), Release: &release, Status: &status})
}

// cancel sets a task's status to cancelled without a fencing token (so a
// live lease refuses it), if it is still at version.
func (k *caller) cancel(task string, version uint64) history.Op {
	status := "cancelled"
	in := history.Input{Key: task, ExpectVersion: &version, Status: status}
	return k.updateTask(in, client.UpdateTaskRequest{ExpectVersion: &version, Status: &status})
}

func (k *caller) updateTask(in history.Input, req client.UpdateTaskRequest) history.Op {
	return k.call(history.TaskUpdate, in, k.key("update"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		t, err := k.c.UpdateTask(ctx, k.w.cfg.Tenant, in.Key, req, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

// createTask creates a task, recorded (the lifecycle checker reads its
// available_at and max_attempts from the answer).
func (k *caller) createTask(req client.CreateTaskRequest, key string) history.Op {
	in := history.Input{Key: req.TaskID, Queue: req.Queue, MaxAttempts: req.MaxAttempts, DelayMS: req.Delay.Milliseconds(),
		RetentionMS: req.Retention.Milliseconds(), DependsOn: req.DependsOn, DepPolicy: req.DependencyPolicy,
		ConcurrencyKey: req.ConcurrencyKey}
	if req.AvailableAt != nil {
		in.AvailableAtMS = req.AvailableAt.UnixMilli()
	}
	return k.call(history.TaskCreate, in, key, func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		t, err := k.c.CreateTask(ctx, k.w.cfg.Tenant, req, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

// fail ends the attempt held under token as failed.
func (k *caller) fail(task string, token uint64, nonRetryable bool) history.Op {
	in := history.Input{Key: task, Token: &token, NonRetryable: nonRetryable}
	return k.call(history.TaskFail, in, k.key("fail"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		t, err := k.c.FailTask(ctx, k.w.cfg.Tenant, task, client.FailTaskRequest{FencingToken: token, Error: "chaos: the attempt failed", NonRetryable: nonRetryable}, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

// retry revives a task (a dead one, in the workload) with its attempts
// reset, claimable after delay (0: at once).
func (k *caller) retry(task string, delay time.Duration) history.Op {
	in := history.Input{Key: task, DelayMS: delay.Milliseconds()}
	return k.call(history.TaskRetry, in, k.key("retry"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		t, err := k.c.RetryTask(ctx, k.w.cfg.Tenant, task, client.RetryTaskRequest{Delay: delay}, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return taskOutput(t), nil
	})
}

// Artifacts and refs, through Client.Do (the SDK's artifact methods may
// not exist yet).

func (k *caller) tenantPath(parts ...string) string {
	p := "/v1/tenants/" + url.PathEscape(k.w.cfg.Tenant)
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (k *caller) putChunk(body []byte) history.Op {
	d := digestOf(body)
	return k.call(history.ChunkPut, history.Input{Key: d, Digest: d}, k.next("chunk"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		_, err := k.c.Do(ctx, http.MethodPut, k.tenantPath("chunks", d), body, nil, opts...)
		return history.Output{}, err
	})
}

type manifest struct {
	ArtifactID string `json:"artifact_id,omitempty"`
	Version    uint64 `json:"version,omitempty"`
}

type chunkRef struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

type publishBody struct {
	Chunks    []chunkRef    `json:"chunks"`
	Digest    string        `json:"digest"`
	Size      int64         `json:"size"`
	MediaType string        `json:"media_type"`
	TaskID    string        `json:"task_id,omitempty"`
	Fence     *client.Fence `json:"fence,omitempty"`
}

// publish publishes content as a new version of name; group names the
// logical publish this attempt belongs to, key its Idempotency-Key.
func (k *caller) publish(name, group, key string, content []byte, fence *client.Fence) history.Op {
	d := digestOf(content)
	in := history.Input{Key: name, Digest: d, Group: group}
	body := publishBody{Chunks: []chunkRef{{Digest: d, Size: int64(len(content))}}, Digest: d, Size: int64(len(content)), MediaType: "text/plain"}
	if fence != nil {
		in.FenceTask, in.FenceToken = fence.TaskID, fence.Token
		body.TaskID, body.Fence = fence.TaskID, fence
	}
	k.w.noteArtifact(name)
	return k.call(history.ArtifactPublish, in, key, func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		var m manifest
		if _, err := k.c.Do(ctx, http.MethodPost, k.tenantPath("artifacts", name, "versions"), body, &m, opts...); err != nil {
			return history.Output{}, err
		}
		return history.Output{ArtifactID: m.ArtifactID, Version: m.Version}, nil
	})
}

func (k *caller) refPath(ref string) string {
	p := k.tenantPath("refs")
	for _, s := range strings.Split(ref, "/") {
		p += "/" + url.PathEscape(s)
	}
	return p
}

func (k *caller) refGet(ref string) history.Op {
	return k.call(history.RefGet, history.Input{Key: ref}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		var m manifest
		if _, err := k.c.Do(ctx, http.MethodGet, k.refPath(ref), nil, &m, opts...); err != nil {
			return history.Output{}, err
		}
		return history.Output{Exists: true, Value: m.ArtifactID}, nil
	})
}

func (k *caller) refSet(ref, artifactID string, expect *string, fence *client.Fence) history.Op {
	in := history.Input{Key: ref, Value: artifactID, Expect: expect}
	if fence != nil {
		in.FenceTask, in.FenceToken = fence.TaskID, fence.Token
	}
	return k.call(history.RefSet, in, k.key("ref"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		req := client.SetRefRequest{ArtifactID: artifactID, Fence: fence}
		if expect != nil { // "": the ref must be absent
			req.ExpectAbsent, req.Expect = *expect == "", *expect
		}
		var m manifest
		if _, err := k.c.Do(ctx, http.MethodPut, k.refPath(ref), req, &m, opts...); err != nil {
			return history.Output{}, err
		}
		return history.Output{Exists: true, Value: m.ArtifactID}, nil
	})
}

func (k *caller) artifactVersions(name string) history.Op {
	return k.call(history.ArtifactGet, history.Input{Key: name}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		var l struct {
			Versions []manifest `json:"versions"`
		}
		if _, err := k.c.Do(ctx, http.MethodGet, k.tenantPath("artifacts", name, "versions"), nil, &l, opts...); err != nil {
			return history.Output{}, err
		}
		var out history.Output
		for _, m := range l.Versions {
			out.Values = append(out.Values, "v"+itoa(int(m.Version))+"="+m.ArtifactID)
		}
		return out, nil
	})
}

// Checkpoints.

func (k *caller) checkpointHead(thread string) history.Op {
	return k.call(history.CheckpointHead, history.Input{Key: thread}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		cp, err := k.c.LatestCheckpoint(ctx, k.w.cfg.Tenant, thread, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return history.Output{Exists: true, Value: cp.CheckpointID}, nil
	})
}

func (k *caller) checkpointPut(thread, id, parent string, fence *client.Fence) history.Op {
	in := history.Input{Key: thread, Value: id, Expect: &parent}
	if fence != nil {
		in.FenceTask, in.FenceToken = fence.TaskID, fence.Token
	}
	return k.call(history.CheckpointPut, in, k.key("cp"), func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		req := client.PutCheckpointRequest{ParentID: parent, Data: jsonValue(id), Fence: fence}
		cp, err := k.c.PutCheckpoint(ctx, k.w.cfg.Tenant, thread, id, req, opts...)
		if err != nil {
			return history.Output{}, err
		}
		return history.Output{Exists: true, Value: cp.CheckpointID}, nil
	})
}

func (k *caller) checkpointList(thread string) history.Op {
	return k.call(history.CheckpointList, history.Input{Key: thread}, "", func(ctx context.Context, opts []client.RequestOption, _ *history.Op) (history.Output, error) {
		var out history.Output
		before := ""
		for {
			l, err := k.c.ListCheckpoints(ctx, k.w.cfg.Tenant, thread, client.ListCheckpointsOptions{Before: before, Limit: 200}, opts...)
			if err != nil {
				if errors.Is(err, client.ErrNotFound) && before == "" {
					return out, nil // no checkpoint at all
				}
				return history.Output{}, err
			}
			for _, cp := range l {
				out.Values = append(out.Values, cp.CheckpointID)
			}
			if len(l) < 200 {
				return out, nil
			}
			before = l[len(l)-1].CheckpointID
		}
	})
}

// handoff finishes the stage of task under token and opens the next
// stage's task in one transaction: a fenced update of task, the creation
// of task next and an insert of its entry in the handoff namespace.
func (k *caller) handoff(task string, token uint64, result, next string) history.Op {
	key := k.key("txn")
	entry := HandNamespace + "/" + next
	zero := uint64(0)
	k.w.noteHandoff(next)
	return k.call(history.Txn, history.Input{Key: task}, key, func(ctx context.Context, opts []client.RequestOption, op *history.Op) (history.Output, error) {
		op.Sub = []history.Op{
			{Kind: history.TaskUpdate, In: history.Input{Key: task, Token: &token, Value: result}},
			{Kind: history.TaskCreate, In: history.Input{Key: next, Queue: HandoffQueue}},
			{Kind: history.KVPut, In: history.Input{Key: entry, Value: result, ExpectVersion: &zero}},
		}
		ops := []client.TxnOp{
			client.TxnUpdateTask(task, client.UpdateTaskRequest{FencingToken: &token, Result: jsonValue(result)}),
			client.TxnCreateTask(client.CreateTaskRequest{TaskID: next, Queue: HandoffQueue}),
			client.TxnPutKV(HandNamespace, next, client.PutKVRequest{Value: jsonValue(result), ExpectVersion: &zero}),
		}
		results, err := k.c.Txn(ctx, k.w.cfg.Tenant, ops, opts...)
		fillSubs(op, results, err)
		return history.Output{}, err
	})
}

// fillSubs gives each sub-op of a transaction its outcome.
func fillSubs(op *history.Op, results []json.RawMessage, err error) {
	outcome, code, msg := Classify(err)
	failed := -1
	var e *client.Error
	if outcome == history.Fail && errors.As(err, &e) {
		if i, ok := e.OpIndex(); ok {
			failed = i
		}
	}
	for i := range op.Sub {
		s := &op.Sub[i]
		switch {
		case outcome == history.OK:
			s.Outcome = history.OK
			if i < len(results) {
				s.Out = subOutput(s.Kind, results[i])
			}
		case outcome == history.Unknown:
			s.Outcome, s.Code = history.Unknown, code
		case i == failed:
			s.Outcome, s.Code, s.Err = history.Fail, code, msg
			s.Out = withDetails(s.Out, err)
		default:
			s.Outcome, s.Code = history.Fail, history.Aborted
		}
	}
}

func subOutput(kind history.Kind, raw json.RawMessage) history.Output {
	switch kind {
	case history.TaskUpdate, history.TaskCreate, history.TaskClaim, history.TaskFail, history.TaskRetry:
		var t client.Task
		if json.Unmarshal(raw, &t) == nil {
			return taskOutput(&t)
		}
	case history.KVPut:
		var e client.KVEntry
		if json.Unmarshal(raw, &e) == nil {
			return kvOutput(&e)
		}
	}
	return history.Output{}
}
