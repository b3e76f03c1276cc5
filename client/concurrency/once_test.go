package concurrency_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/concurrency"
	"github.com/baton-dev/baton/client/internal/clustertest"
	"github.com/google/uuid"
)

// ledger is the operations ledger of the package's node, seen through the
// recording proxy, which can refuse or cut finishes on cue: failFinish
// sends the next finishes of these states to the node without a leader
// (503, nothing applied); lostFinish cuts the connection of the next
// finishes after the node applied them (the answer is lost).
type ledger struct {
	p          *clustertest.Proxy
	node       *client.Client
	mu         sync.Mutex
	failFinish map[string]int
	lostFinish int
}

type finishCall struct{ key, state string }

func newLedger(t *testing.T) (*ledger, *client.Client) {
	t.Helper()
	l := &ledger{failFinish: map[string]int{}, node: newClientCfg(t, client.Config{Endpoints: []string{env.URL()}, Token: env.Token})}
	l.p = clustertest.NewProxy(t, env.URL(), func(_ int, r *http.Request) clustertest.Hop {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/finish") {
			return clustertest.Hop{}
		}
		var in client.FinishOpRequest
		_ = json.NewDecoder(r.Body).Decode(&in)
		l.mu.Lock()
		defer l.mu.Unlock()
		switch {
		case l.failFinish[in.State] > 0:
			l.failFinish[in.State]--
			return clustertest.Hop{To: env.Leaderless}
		case l.lostFinish > 0:
			l.lostFinish--
			return clustertest.Hop{Fault: clustertest.CutAfter}
		}
		return clustertest.Hop{}
	})
	// One attempt per call: Once's own retry of a finish is what is tested.
	return l, newClientCfg(t, client.Config{Endpoints: []string{l.p.URL}, Token: env.Token,
		Timeout: 2 * time.Second, MaxRetry: time.Nanosecond})
}

// op is the node's record of the op.
func (l *ledger) op(id string) client.Op {
	op, err := l.node.GetOp(bg, "acme", id)
	if err != nil {
		return client.Op{}
	}
	return *op
}

func (l *ledger) finishCalls() []finishCall {
	var out []finishCall
	for _, r := range l.p.Requests() {
		if strings.HasSuffix(r.Path, "/finish") {
			var in client.FinishOpRequest
			_ = json.Unmarshal(r.Body, &in)
			out = append(out, finishCall{r.Key, in.State})
		}
	}
	return out
}

// newSendReq is a request for an op of its own: the node keeps ops.
func newSendReq() concurrency.OnceRequest {
	return concurrency.OnceRequest{OpID: "notify:" + uuid.NewString(), Kind: "email.send", Params: map[string]string{"to": "ops@example.com"}}
}

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
	l, c := newLedger(t)
	sendReq := newSendReq()
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
	l, c := newLedger(t)
	sendReq := newSendReq()
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
	l, c := newLedger(t)
	sendReq := newSendReq()
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
			_, c := newLedger(t)
			sendReq := newSendReq()
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
	_, c := newLedger(t)
	sendReq := newSendReq()
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
			l, c := newLedger(t)
			sendReq := newSendReq()
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
	_, c := newLedger(t)
	sendReq := newSendReq()
	ctx := client.WithIdempotencyKey(bg, "caller-key-"+uuid.NewString())
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
	_, c := newLedger(t)
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
