package concurrency_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
)

// fakeLedger is an in-memory operations ledger with the server's rules:
// begin creates (201) or returns the record (200), a different params
// digest is idempotency_mismatch, a terminal op never changes, and a
// repeated Idempotency-Key replays the first answer.
type fakeLedger struct {
	mu       sync.Mutex
	ops      map[string]*client.Op
	replies  map[string]reply // by Idempotency-Key
	finishes []finishCall
	// failFinish answers the next finishes of these states 503 before
	// applying them; lostFinish applies the next finishes but answers 503.
	failFinish map[string]int
	lostFinish int
}

type reply struct {
	status int
	body   any
}

type finishCall struct{ key, state string }

func newFakeLedger(t *testing.T) (*fakeLedger, *client.Client) {
	t.Helper()
	l := &fakeLedger{ops: map[string]*client.Op{}, replies: map[string]reply{}, failFinish: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/tenants/acme/ops/{id}/begin", l.begin)
	mux.HandleFunc("POST /v1/tenants/acme/ops/{id}/finish", l.finish)
	mux.HandleFunc("GET /v1/tenants/acme/ops/{id}", l.get)
	s := serve(t, mux.ServeHTTP)
	// One attempt per call: Once's own retry of a finish is what is tested.
	return l, newClientCfg(t, client.Config{Endpoints: []string{s.URL}, Timeout: 2 * time.Second, MaxRetry: time.Nanosecond})
}

func (l *fakeLedger) answer(w http.ResponseWriter, key string, rep reply) {
	if key != "" {
		l.replies[key] = rep
	}
	writeJSON(w, rep.status, rep.body)
}

func (l *fakeLedger) replay(w http.ResponseWriter, key string) bool {
	rep, ok := l.replies[key]
	if ok {
		w.Header().Set("Idempotent-Replay", "true")
		writeJSON(w, rep.status, rep.body)
	}
	return ok
}

func (l *fakeLedger) begin(w http.ResponseWriter, r *http.Request) {
	var in client.BeginOpRequest
	_ = json.NewDecoder(r.Body).Decode(&in)
	l.mu.Lock()
	defer l.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	if l.replay(w, key) {
		return
	}
	id := r.PathValue("id")
	if op, ok := l.ops[id]; ok {
		if op.ParamsDigest != in.ParamsDigest {
			writeError(w, 409, "idempotency_mismatch", "op exists with another params_digest", map[string]any{"params_digest": op.ParamsDigest})
			return
		}
		l.answer(w, key, reply{200, *op})
		return
	}
	now := time.Now().UTC()
	op := &client.Op{OpID: id, Kind: in.Kind, ParamsDigest: in.ParamsDigest, TaskID: in.TaskID, State: client.OpStarted,
		Result: json.RawMessage("null"), CreatedAt: now, UpdatedAt: now}
	l.ops[id] = op
	l.answer(w, key, reply{201, *op})
}

func (l *fakeLedger) finish(w http.ResponseWriter, r *http.Request) {
	var in client.FinishOpRequest
	_ = json.NewDecoder(r.Body).Decode(&in)
	l.mu.Lock()
	defer l.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	l.finishes = append(l.finishes, finishCall{key, in.State})
	if l.failFinish[in.State] > 0 {
		l.failFinish[in.State]--
		unavailable(w, r, 0)
		return
	}
	if l.lostFinish == 0 && l.replay(w, key) {
		return
	}
	op, ok := l.ops[r.PathValue("id")]
	switch {
	case !ok:
		writeError(w, 404, "not_found", "no such op", nil)
		return
	case op.Terminal() && (op.State != in.State || string(op.Result) != string(in.Result)):
		writeError(w, 409, "version_mismatch", "op already "+op.State, map[string]any{"current_state": op.State})
		return
	}
	op.State, op.Result, op.UpdatedAt = in.State, in.Result, time.Now().UTC()
	if l.lostFinish > 0 {
		l.lostFinish--
		unavailable(w, r, 0)
		return
	}
	l.answer(w, key, reply{200, *op})
}

func (l *fakeLedger) get(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	op, ok := l.ops[r.PathValue("id")]
	if !ok {
		writeError(w, 404, "not_found", "no such op", nil)
		return
	}
	writeJSON(w, 200, *op)
}

func (l *fakeLedger) op(id string) client.Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	if op, ok := l.ops[id]; ok {
		return *op
	}
	return client.Op{}
}

func (l *fakeLedger) finishCalls() []finishCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]finishCall(nil), l.finishes...)
}

var sendReq = concurrency.OnceRequest{OpID: "notify:r42", Kind: "email.send", Params: map[string]string{"to": "ops@example.com"}}

// countingFn is an action that counts its runs.
type countingFn struct {
	mu   sync.Mutex
	runs int
	fn   concurrency.OnceFunc
}

func (c *countingFn) run(ctx context.Context) (json.RawMessage, error) {
	c.mu.Lock()
	c.runs++
	c.mu.Unlock()
	return c.fn(ctx)
}

func (c *countingFn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs
}

func succeed(result string) *countingFn {
	return &countingFn{fn: func(context.Context) (json.RawMessage, error) { return json.RawMessage(result), nil }}
}

func TestOnceRunsOnceAndReplaysTheResult(t *testing.T) {
	l, c := newFakeLedger(t)
	fn := succeed(`{"message_id":"m-1"}`)
	for i := range 3 {
		res, err := concurrency.Once(bg, c, "acme", sendReq, fn.run)
		if err != nil || string(res) != `{"message_id":"m-1"}` {
			t.Fatalf("call %d: got %s, %v; want the result", i, res, err)
		}
	}
	if fn.count() != 1 {
		t.Errorf("got %d runs, want 1", fn.count())
	}
	if op := l.op(sendReq.OpID); op.State != client.OpSucceeded || op.Kind != "email.send" {
		t.Errorf("got record %+v, want succeeded email.send", op)
	}
}

func TestOnceRecordsFailure(t *testing.T) {
	l, c := newFakeLedger(t)
	errSMTP := errors.New("smtp 550: mailbox unavailable")
	fn := &countingFn{fn: func(context.Context) (json.RawMessage, error) { return nil, errSMTP }}
	_, err := concurrency.Once(bg, c, "acme", sendReq, fn.run)
	var fe *concurrency.OpFailedError
	if !errors.As(err, &fe) || !errors.Is(err, concurrency.ErrOpFailed) || !errors.Is(err, errSMTP) {
		t.Fatalf("got %v, want *OpFailedError wrapping the action's error", err)
	}
	if op := l.op(sendReq.OpID); op.State != client.OpFailed || string(op.Result) != `{"error":"smtp 550: mailbox unavailable"}` {
		t.Errorf("got record %s %s, want failed with the message", op.State, op.Result)
	}
	_, err = concurrency.Once(bg, c, "acme", sendReq, fn.run)
	if !errors.As(err, &fe) || fe.Err != nil || fe.Message() != errSMTP.Error() {
		t.Fatalf("retry: got %v, want the recorded failure", err)
	}
	if fn.count() != 1 {
		t.Errorf("got %d runs, want 1", fn.count())
	}
}

// TestOnceAfterCrashBetweenBeginAndFinish: the first attempt dies after
// the action ran and before its outcome was recorded (simulated by ending
// its ctx inside the action). A retried Once does not run the action
// again: it reports the record in doubt. Once the record is settled with
// FinishOp, Once returns the recorded result.
func TestOnceAfterCrashBetweenBeginAndFinish(t *testing.T) {
	l, c := newFakeLedger(t)
	ctx, crash := context.WithCancel(bg)
	first := &countingFn{fn: func(ctx context.Context) (json.RawMessage, error) {
		crash() // the process dies here, after the e-mail went out
		return nil, ctx.Err()
	}}
	_, err := concurrency.Once(ctx, c, "acme", sendReq, first.run)
	var ue *concurrency.OpUnrecordedError
	if !errors.As(err, &ue) || !errors.Is(err, concurrency.ErrOpUnrecorded) || ue.Recorded != client.OpStarted {
		t.Fatalf("crashed attempt: got %v, want *OpUnrecordedError with the record still started", err)
	}
	if got := l.op(sendReq.OpID).State; got != client.OpStarted {
		t.Fatalf("got record state %s, want started", got)
	}

	retry := succeed(`{"message_id":"m-2"}`)
	_, err = concurrency.Once(bg, c, "acme", sendReq, retry.run)
	var de *concurrency.OpInDoubtError
	if !errors.Is(err, concurrency.ErrOpInDoubt) || !errors.As(err, &de) || de.Op.State != client.OpStarted || de.Op.OpID != sendReq.OpID {
		t.Fatalf("retry: got %v, want *OpInDoubtError with the started record", err)
	}
	if retry.count() != 0 {
		t.Fatalf("retry ran the action %d times, want 0", retry.count())
	}

	// The caller reconciles (the message was sent) and settles the record.
	if _, err := c.FinishOp(bg, "acme", sendReq.OpID, client.FinishOpRequest{State: client.OpSucceeded, Result: json.RawMessage(`{"message_id":"m-1"}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := concurrency.Once(bg, c, "acme", sendReq, retry.run)
	if err != nil || string(res) != `{"message_id":"m-1"}` || retry.count() != 0 {
		t.Fatalf("after settling: got %s, %v, %d runs; want the recorded result and no run", res, err, retry.count())
	}
}

func TestOnceDoesNotRunAnOpBegunElsewhere(t *testing.T) {
	for _, state := range []string{client.OpStarted, client.OpUnknown} {
		t.Run(state, func(t *testing.T) {
			_, c := newFakeLedger(t)
			digest, _ := client.ParamsDigest(sendReq.Params)
			if _, _, err := c.BeginOp(bg, "acme", sendReq.OpID, client.BeginOpRequest{Kind: "email.send", ParamsDigest: digest}); err != nil {
				t.Fatal(err)
			}
			if state == client.OpUnknown {
				if _, err := c.FinishOp(bg, "acme", sendReq.OpID, client.FinishOpRequest{State: client.OpUnknown}); err != nil {
					t.Fatal(err)
				}
			}
			fn := succeed(`1`)
			_, err := concurrency.Once(bg, c, "acme", sendReq, fn.run)
			var de *concurrency.OpInDoubtError
			if !errors.As(err, &de) || de.Op.State != state || fn.count() != 0 {
				t.Errorf("got %v after %d runs, want in doubt (%s) and no run", err, fn.count(), state)
			}
		})
	}
}

func TestOnceOtherParamsAreRefused(t *testing.T) {
	_, c := newFakeLedger(t)
	if _, err := concurrency.Once(bg, c, "acme", sendReq, succeed(`1`).run); err != nil {
		t.Fatal(err)
	}
	other := sendReq
	other.Params = map[string]string{"to": "someone-else@example.com"}
	fn := succeed(`2`)
	_, err := concurrency.Once(bg, c, "acme", other, fn.run)
	if !errors.Is(err, client.ErrIdempotencyMismatch) || fn.count() != 0 {
		t.Errorf("got %v after %d runs, want ErrIdempotencyMismatch and no run", err, fn.count())
	}
}

// TestOnceFinishUnavailable: a finish the cluster cannot take is retried
// with the same Idempotency-Key; when it still fails, Once records unknown
// (or reports the record still started when even that fails).
func TestOnceFinishUnavailable(t *testing.T) {
	cases := []struct {
		name         string
		failFinish   map[string]int
		lostFinish   int
		wantErr      bool
		wantRecorded string // OpUnrecordedError.Recorded
		wantState    string // in the ledger
		wantStates   []string
	}{
		{"second try lands", map[string]int{"succeeded": 1}, 0, false, "", "succeeded", []string{"succeeded", "succeeded"}},
		{"recorded as unknown", map[string]int{"succeeded": 2}, 0, true, "unknown", "unknown", []string{"succeeded", "succeeded", "unknown"}},
		{"nothing recorded", map[string]int{"succeeded": 2, "unknown": 1}, 0, true, "started", "started", []string{"succeeded", "succeeded", "unknown"}},
		{"lost answer replayed", nil, 1, false, "", "succeeded", []string{"succeeded", "succeeded"}},
		{"lost answers, found on reading", nil, 2, false, "", "succeeded", []string{"succeeded", "succeeded", "unknown"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, c := newFakeLedger(t)
			for s, n := range tc.failFinish {
				l.failFinish[s] = n
			}
			l.lostFinish = tc.lostFinish
			fn := succeed(`{"message_id":"m-1"}`)
			res, err := concurrency.Once(bg, c, "acme", sendReq, fn.run)
			var ue *concurrency.OpUnrecordedError
			switch {
			case !tc.wantErr && (err != nil || string(res) != `{"message_id":"m-1"}`):
				t.Errorf("got %s, %v; want the result", res, err)
			case tc.wantErr && (!errors.As(err, &ue) || ue.Recorded != tc.wantRecorded || !errors.Is(err, client.ErrUnavailable)):
				t.Errorf("got %v, want *OpUnrecordedError recorded %q wrapping ErrUnavailable", err, tc.wantRecorded)
			case tc.wantErr && (ue.State != client.OpSucceeded || string(ue.Result) != `{"message_id":"m-1"}`):
				t.Errorf("got unrecorded %s %s, want succeeded with the action's result", ue.State, ue.Result)
			}
			if got := l.op(sendReq.OpID).State; got != tc.wantState {
				t.Errorf("got ledger state %s, want %s", got, tc.wantState)
			}
			calls := l.finishCalls()
			var states []string
			for _, fc := range calls {
				states = append(states, fc.state)
			}
			if len(states) != len(tc.wantStates) || (len(calls) > 1 && calls[0].key != calls[1].key) {
				t.Errorf("got finishes %+v, want states %v with the first two under one key", calls, tc.wantStates)
			}
			if fn.count() != 1 {
				t.Errorf("got %d runs, want 1", fn.count())
			}
		})
	}
}

// TestOnceIgnoresContextKey: a key attached to ctx would make the begin of
// a later Once replay this one's 201 and run the action again.
func TestOnceIgnoresContextKey(t *testing.T) {
	_, c := newFakeLedger(t)
	ctx := client.WithIdempotencyKey(bg, "caller-key")
	fn := succeed(`1`)
	for range 2 {
		if _, err := concurrency.Once(ctx, c, "acme", sendReq, fn.run); err != nil {
			t.Fatal(err)
		}
	}
	if fn.count() != 1 {
		t.Errorf("got %d runs, want 1", fn.count())
	}
}

func TestOnceValidates(t *testing.T) {
	_, c := newFakeLedger(t)
	fn := succeed(`1`)
	for _, req := range []concurrency.OnceRequest{{Kind: "k"}, {OpID: "o"}, {OpID: "o", Kind: "k", Params: make(chan int)}} {
		if _, err := concurrency.Once(bg, c, "acme", req, fn.run); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("Once(%+v): got %v, want ErrInvalidArgument", req, err)
		}
	}
	if fn.count() != 0 {
		t.Errorf("got %d runs, want 0", fn.count())
	}
}
