package concurrency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/client"
)

// Errors of Once. Each is matched with errors.Is; the concrete types carry
// the details (errors.As).
var (
	// ErrOpFailed: the action's recorded outcome is failed (*OpFailedError).
	ErrOpFailed = errors.New("op failed")
	// ErrOpInDoubt: an earlier attempt began the action and did not record
	// an outcome (state started or unknown), so it may or may not have
	// happened. Once did not run it again (*OpInDoubtError).
	ErrOpInDoubt = errors.New("op outcome in doubt")
	// ErrOpUnrecorded: this call ran the action but could not record its
	// outcome in the ledger (*OpUnrecordedError).
	ErrOpUnrecorded = errors.New("op outcome not recorded")
)

// OnceRequest names one external action for Once.
type OnceRequest struct {
	// OpID is the action's stable id, the same on every retry, e.g.
	// "notify:report-42". Required.
	OpID string
	// Kind says what sort of action it is, e.g. "email.send". Required.
	Kind string
	// Params are the action's parameters. Their digest (client.ParamsDigest) is
	// recorded with the op: the same OpID with other params is
	// client.ErrIdempotencyMismatch.
	Params any
	// TaskID optionally names the task on whose behalf the action runs.
	TaskID string
	// Fence, when set, makes the ledger writes apply only while its token
	// is the task's current one (client.ErrFenced otherwise).
	Fence *client.Fence
}

// OnceFunc performs the external action and returns its result as JSON
// (nil is recorded as null).
type OnceFunc func(ctx context.Context) (json.RawMessage, error)

// Once runs fn at most once per op id across retries, processes and
// crashes, using the operations ledger:
//
//  1. It begins op req.OpID with the digest of req.Params.
//  2. When this call created the record, it runs fn and records the
//     outcome: succeeded with fn's result, or failed with
//     {"error": fn's message}. It returns fn's result, or an
//     *OpFailedError wrapping fn's error.
//  3. When the record already existed, fn is not run. A succeeded op
//     returns its recorded result; a failed op returns an *OpFailedError
//     with the recorded result; a started or unknown op returns an
//     *OpInDoubtError (ErrOpInDoubt) carrying the record: an earlier
//     attempt may have performed the action, so the caller must find out
//     (for example by asking the external system) and then settle the
//     record with client.Client.FinishOp.
//
// If fn returns an error after ctx is done, the action was interrupted:
// its outcome is unknown and Once tries to record unknown. If recording
// the outcome keeps failing (the cluster unavailable beyond the client's
// retry budget, tried twice with the same Idempotency-Key), Once tries to
// record unknown instead and returns an *OpUnrecordedError
// (ErrOpUnrecorded) with fn's result and what the ledger now holds.
//
// An error from beginning the op (client.ErrIdempotencyMismatch, client.ErrFenced,
// client.ErrUnavailable...) is returned as is and fn has not run; the record may
// nevertheless exist in state started if the begin was applied but its
// answer lost, in which case a later Once reports ErrOpInDoubt.
//
// Once sets its own Idempotency-Keys: a fresh one for each begin, so that
// a later Once sees the existing record instead of a replay of this one's
// answer, and one per finish, reused by the finish's retries. A key
// attached to ctx with WithIdempotencyKey is not used.
func Once(ctx context.Context, c *client.Client, tenant string, req OnceRequest, fn OnceFunc) (json.RawMessage, error) {
	if err := required("tenant", tenant, "op id", req.OpID, "kind", req.Kind); err != nil {
		return nil, err
	}
	digest, err := client.ParamsDigest(req.Params)
	if err != nil {
		return nil, err
	}
	op, created, err := c.BeginOp(ctx, tenant, req.OpID,
		client.BeginOpRequest{Kind: req.Kind, ParamsDigest: digest, TaskID: req.TaskID, Fence: req.Fence},
		client.IdempotencyKey(newKey()))
	if err != nil {
		return nil, fmt.Errorf("op %s: begin: %w", req.OpID, err)
	}
	if !created {
		return recordedOutcome(op)
	}
	result, fnErr := fn(ctx)
	return finishOnce(ctx, c, tenant, req, result, fnErr)
}

// recordedOutcome turns an existing record into Once's answer.
func recordedOutcome(op *client.Op) (json.RawMessage, error) {
	switch op.State {
	case client.OpSucceeded:
		return op.Result, nil
	case client.OpFailed:
		return nil, &OpFailedError{Op: op}
	}
	return nil, &OpInDoubtError{Op: op}
}

// finishOnce records the outcome of fn and builds Once's answer.
func finishOnce(ctx context.Context, c *client.Client, tenant string, req OnceRequest, result json.RawMessage, fnErr error) (json.RawMessage, error) {
	state := client.OpSucceeded
	switch {
	case fnErr != nil && ctx.Err() != nil:
		state, result = client.OpUnknown, errorResult(fnErr)
	case fnErr != nil:
		state, result = client.OpFailed, errorResult(fnErr)
	case result == nil:
		result = json.RawMessage("null")
	}
	fin := client.FinishOpRequest{State: state, Result: result, Fence: req.Fence}
	key := newKey()
	op, err := c.FinishOp(ctx, tenant, req.OpID, fin, client.IdempotencyKey(key))
	inDoubt := errors.Is(err, client.ErrOutcomeUnknown) // a finish that may have been recorded
	if errors.Is(err, client.ErrUnavailable) && ctx.Err() == nil {
		op, err = c.FinishOp(ctx, tenant, req.OpID, fin, client.IdempotencyKey(key))
		inDoubt = inDoubt || errors.Is(err, client.ErrOutcomeUnknown)
	}
	unrecorded := &OpUnrecordedError{OpID: req.OpID, State: state, Result: result, Err: err}
	if errors.Is(err, client.ErrUnavailable) && ctx.Err() == nil && state != client.OpUnknown {
		if op, err = recordUnknown(ctx, c, tenant, req, fin); err != nil {
			unrecorded.Err = errors.Join(unrecorded.Err, err)
		}
	}
	switch {
	case err != nil:
		unrecorded.Recorded = unrecordedState(ctx, err, inDoubt)
		if inDoubt && !errors.Is(unrecorded.Err, client.ErrOutcomeUnknown) {
			unrecorded.Err = fmt.Errorf("%w: a finish got no answer and may have been recorded: %w", client.ErrOutcomeUnknown, unrecorded.Err)
		}
		return nil, unrecorded
	case op.State == client.OpUnknown:
		unrecorded.Recorded = client.OpUnknown
		if unrecorded.Err == nil {
			unrecorded.Err = fnErr // unknown was the outcome: fn was interrupted
		}
		return nil, unrecorded
	case op.State == client.OpFailed:
		return nil, &OpFailedError{Op: op, Err: fnErr}
	}
	return op.Result, nil
}

// recordUnknown is the fallback when the outcome could not be written:
// record unknown instead. A ledger that already holds a terminal state got
// one of the earlier finishes after all (their answers were lost); that
// record is returned when it is the outcome this call meant.
func recordUnknown(ctx context.Context, c *client.Client, tenant string, req OnceRequest, fin client.FinishOpRequest) (*client.Op, error) {
	unknown := client.FinishOpRequest{State: client.OpUnknown, Result: fin.Result, Fence: req.Fence}
	op, err := c.FinishOp(ctx, tenant, req.OpID, unknown, client.IdempotencyKey(newKey()))
	if !errors.Is(err, client.ErrVersionMismatch) {
		return op, err
	}
	if cur, gerr := c.GetOp(ctx, tenant, req.OpID); gerr == nil && cur.State == fin.State {
		return cur, nil
	}
	return nil, err
}

// unrecordedState is what the ledger holds after a failed finish, as far
// as the caller can tell: still started when the cluster could not be
// reached (or ctx ended) and no finish may have been recorded, unknown to
// the caller ("") when it refused or one may have been (inDoubt).
func unrecordedState(ctx context.Context, err error, inDoubt bool) string {
	if inDoubt || errors.Is(err, client.ErrOutcomeUnknown) {
		return ""
	}
	if errors.Is(err, client.ErrUnavailable) || ctx.Err() != nil {
		return client.OpStarted
	}
	return ""
}

// errorResult is the recorded result of a failed action.
func errorResult(err error) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	return b
}

// newKey returns a fresh Idempotency-Key that carries its time.
func newKey() string { return client.NewIdempotencyKey() }

// OpFailedError is an action whose recorded outcome is failed.
type OpFailedError struct {
	Op  *client.Op // the record; Op.Result is {"error": message} when Once recorded it
	Err error      // fn's error when this call ran the action; nil when read from the ledger
}

func (e *OpFailedError) Error() string {
	return fmt.Sprintf("op %s failed: %s", e.Op.OpID, e.Message())
}

// Message is the recorded error message: the "error" field of the result
// when it has one, the raw result otherwise.
func (e *OpFailedError) Message() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	var r struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(e.Op.Result, &r) == nil && r.Error != "" {
		return r.Error
	}
	return string(e.Op.Result)
}

// Is matches ErrOpFailed.
func (e *OpFailedError) Is(target error) bool { return target == ErrOpFailed }

// Unwrap returns fn's error, if this call ran the action.
func (e *OpFailedError) Unwrap() error { return e.Err }

// OpInDoubtError is an action that an earlier attempt began without
// recording an outcome (Op.State is started or unknown). Once did not run
// it: the caller reconciles, then records the outcome with client.Client.FinishOp.
type OpInDoubtError struct {
	Op *client.Op
}

func (e *OpInDoubtError) Error() string {
	return fmt.Sprintf("op %s is %s since %s: an earlier attempt may have performed it; reconcile, then finish it",
		e.Op.OpID, e.Op.State, e.Op.UpdatedAt.Format("2006-01-02T15:04:05.000Z07:00"))
}

// Is matches ErrOpInDoubt.
func (e *OpInDoubtError) Is(target error) bool { return target == ErrOpInDoubt }

// OpUnrecordedError is an action this call ran whose outcome the ledger
// does not hold.
type OpUnrecordedError struct {
	OpID   string
	State  string          // the outcome this call meant to record
	Result json.RawMessage // and its result: fn's result, or {"error": ...}
	// Recorded is the op's state in the ledger as far as this call knows:
	// client.OpUnknown when unknown was recorded, client.OpStarted when
	// nothing could be written, "" when the ledger refused the outcome (Err
	// says why: client.ErrFenced, client.ErrVersionMismatch when someone
	// else settled the op meanwhile) or when a finish got no answer and may
	// have been recorded (Err matches client.ErrOutcomeUnknown).
	Recorded string
	Err      error
}

func (e *OpUnrecordedError) Error() string {
	switch e.Recorded {
	case client.OpUnknown:
		return fmt.Sprintf("op %s ran (outcome %s) but is recorded as unknown: %v", e.OpID, e.State, e.Err)
	case client.OpStarted:
		return fmt.Sprintf("op %s ran (outcome %s) but its outcome is unrecorded (still started): %v", e.OpID, e.State, e.Err)
	}
	if errors.Is(e.Err, client.ErrOutcomeUnknown) {
		return fmt.Sprintf("op %s ran (outcome %s) but its outcome may or may not be recorded: %v", e.OpID, e.State, e.Err)
	}
	return fmt.Sprintf("op %s ran (outcome %s) but the ledger refused the outcome: %v", e.OpID, e.State, e.Err)
}

// Is matches ErrOpUnrecorded.
func (e *OpUnrecordedError) Is(target error) bool { return target == ErrOpUnrecorded }

// Unwrap returns why the outcome was not recorded.
func (e *OpUnrecordedError) Unwrap() error { return e.Err }
