package client_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/google/uuid"
)

var allSentinels = []error{
	client.ErrInvalidArgument, client.ErrDigestMismatch, client.ErrMissingChunks,
	client.ErrUnauthenticated, client.ErrForbidden, client.ErrNotFound,
	client.ErrAlreadyExists, client.ErrLeaseHeld, client.ErrFenced,
	client.ErrVersionMismatch, client.ErrIdempotencyMismatch, client.ErrCompacted,
	client.ErrTooLarge, client.ErrUnavailable,
}

// TestErrorMapping: every error code the node answers maps to its
// sentinel and to no other, with the status, code and message in *Error.
// Each comes from the package's node, the 503 from the node without a
// leader; only compacted (a watch resumed from history the node dropped)
// comes from a stub.
func TestErrorMapping(t *testing.T) {
	ctx := ctxTimeout(t, time.Minute)
	admin := newClient(t, env.URL())
	reader, err := admin.CreatePrincipal(ctx, "acme", uniqueName("reader"),
		[]client.Grant{{Resource: "kv", Actions: []string{"read"}}})
	if err != nil {
		t.Fatal(err)
	}
	queue := uniqueName("errors")
	held, err := admin.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := admin.ClaimTask(ctx, "acme", held.TaskID, client.ClaimRequest{Owner: "a", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	d := client.Digest([]byte("x"))
	absent := client.Digest([]byte(uuid.NewString()))
	key := client.IdempotencyKey("mapping-" + uuid.NewString())
	if _, err := admin.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: queue}, key); err != nil {
		t.Fatal(err)
	}
	stale, other := claimed.FencingToken+1, claimed.Version+5
	cases := []struct {
		status int
		code   string
		want   error
		token  string // "" is the admin's
		call   func(c *client.Client) error
	}{
		{400, "invalid_argument", client.ErrInvalidArgument, "", func(c *client.Client) error {
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: "not a name"})
			return err
		}},
		{400, "digest_mismatch", client.ErrDigestMismatch, "", func(c *client.Client) error {
			_, err := c.PutChunk(ctx, "acme", d, []byte("y"))
			return err
		}},
		{400, "missing_chunks", client.ErrMissingChunks, "", func(c *client.Client) error {
			_, err := c.PublishArtifact(ctx, "acme", uniqueName("a"), client.PublishRequest{
				Chunks: []client.ChunkRef{{Digest: absent, Size: 36}}, Digest: absent, Size: 36})
			return err
		}},
		{401, "unauthenticated", client.ErrUnauthenticated, "not-a-token", func(c *client.Client) error {
			_, err := c.GetTask(ctx, "acme", held.TaskID)
			return err
		}},
		{403, "forbidden", client.ErrForbidden, reader.Token, func(c *client.Client) error {
			_, err := c.GetTask(ctx, "acme", held.TaskID)
			return err
		}},
		{404, "not_found", client.ErrNotFound, "", func(c *client.Client) error {
			_, err := c.GetTask(ctx, "acme", "no-such-task")
			return err
		}},
		{409, "already_exists", client.ErrAlreadyExists, "", func(c *client.Client) error {
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{TaskID: held.TaskID, Queue: queue})
			return err
		}},
		{409, "lease_held", client.ErrLeaseHeld, "", func(c *client.Client) error {
			_, err := c.ClaimTask(ctx, "acme", held.TaskID, client.ClaimRequest{Owner: "b", Lease: time.Minute})
			return err
		}},
		{409, "fenced", client.ErrFenced, "", func(c *client.Client) error {
			_, err := c.RenewTask(ctx, "acme", held.TaskID, client.RenewRequest{FencingToken: stale, Lease: time.Minute})
			return err
		}},
		{409, "version_mismatch", client.ErrVersionMismatch, "", func(c *client.Client) error {
			return c.DeleteTask(ctx, "acme", held.TaskID, &other)
		}},
		{409, "idempotency_mismatch", client.ErrIdempotencyMismatch, "", func(c *client.Client) error {
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: queue + "-other"}, key)
			return err
		}},
		{410, "compacted", client.ErrCompacted, "", nil},
		{413, "too_large", client.ErrTooLarge, "", func(c *client.Client) error {
			big, _ := json.Marshal(strings.Repeat("x", 16<<20))
			_, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: queue, Payload: big})
			return err
		}},
		{503, "unavailable", client.ErrUnavailable, "", nil},
	}
	if len(cases) != len(allSentinels) {
		t.Fatalf("table covers %d codes, want all %d", len(cases), len(allSentinels))
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			c := newClientCfg(t, client.Config{Endpoints: []string{env.URL()}, Token: cmp.Or(tc.token, env.Token),
				NoSession: true, MaxRetry: time.Millisecond})
			f := tc.call
			switch tc.code {
			case "unavailable":
				c = newClientCfg(t, client.Config{Endpoints: []string{env.Leaderless}, Token: env.Token, MaxRetry: time.Millisecond})
				f = func(c *client.Client) error { _, err := c.GetTask(ctx, "acme", held.TaskID); return err }
			case "compacted":
				// A stub: compacting the shared node's log on cue is not
				// something a test can ask of it.
				h := func(w http.ResponseWriter, r *http.Request) {
					writeError(w, tc.status, tc.code, "it went wrong", nil)
				}
				c = newClientCfg(t, client.Config{Endpoints: []string{serve(t, h).URL}, MaxRetry: time.Millisecond})
				f = func(c *client.Client) error { _, err := c.GetTask(ctx, "acme", "t1"); return err }
			}
			err := f(c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("errors.Is(%v, %v) = false, want true", err, tc.want)
			}
			for _, other := range allSentinels {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("errors.Is(%v, %v) = true, want false", err, other)
				}
			}
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("errors.As(%v, *Error) = false", err)
			}
			if e.Status != tc.status || e.Code != tc.code || e.Message == "" {
				t.Errorf("got %+v, want status %d code %s and a message", e, tc.status, tc.code)
			}
		})
	}
}

func TestErrorDetails(t *testing.T) {
	// A stub: a fencing token of 2^64-1, the precision this checks, is
	// not one a real node reaches.
	body := `{"error": {"code": "fenced", "message": "token 12 is not current (current 15)",
		"current_token": 18446744073709551615, "op_index": 2, "owner": "w1"}}`
	h := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(409)
		_, _ = w.Write([]byte(body))
	}
	c := newClient(t, serve(t, h).URL)
	_, err := c.GetTask(context.Background(), "acme", "t1")
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v, want *Error", err)
	}
	if got, want := e.Error(), "fenced: token 12 is not current (current 15)"; got != want {
		t.Errorf("got Error() %q, want %q", got, want)
	}
	if tok, ok := e.DetailUint("current_token"); !ok || tok != 18446744073709551615 {
		t.Errorf("got current_token %d %v, want max uint64", tok, ok)
	}
	if i, ok := e.OpIndex(); !ok || i != 2 {
		t.Errorf("got op_index %d %v, want 2", i, ok)
	}
	if _, ok := e.Details["op_index"].(json.Number); !ok {
		t.Errorf("got op_index of type %T, want json.Number", e.Details["op_index"])
	}
	if _, ok := e.Details["code"]; ok {
		t.Error("details repeat code")
	}
}

func TestNonBatonErrorBody(t *testing.T) {
	cases := []struct {
		status   int
		body     string
		wantCode string
		wantIs   error
		wantText string
	}{
		{404, "404 page not found\n", "not_found", client.ErrNotFound, "not_found: 404 page not found"},
		{502, "", "", nil, "http 502: Bad Gateway"},
		{500, "<html>oops</html>", "", nil, "http 500: <html>oops</html>"},
	}
	for _, tc := range cases {
		t.Run(tc.wantText, func(t *testing.T) {
			// A stub: these bodies are what a proxy or another server
			// on the way answers, never batond.
			h := func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}
			c := newClient(t, serve(t, h).URL)
			_, err := c.ListTenants(context.Background())
			var e *client.Error
			if !errors.As(err, &e) || e.Code != tc.wantCode {
				t.Fatalf("got %v, want *Error with code %q", err, tc.wantCode)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.wantIs)
			}
			if err.Error() != tc.wantText {
				t.Errorf("got %q, want %q", err.Error(), tc.wantText)
			}
		})
	}
}

func TestTxnFailureHasOpIndex(t *testing.T) {
	ctx := ctxTimeout(t, 30*time.Second)
	p := proxy(t, nil)
	c := newClient(t, p.URL)
	queue := uniqueName("review")
	task, err := c.CreateTask(ctx, "acme", client.CreateTaskRequest{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	v := task.Version + 1
	_, err = c.Txn(ctx, "acme", []client.TxnOp{
		client.TxnCreateTask(client.CreateTaskRequest{Queue: queue}),
		client.TxnUpdateTask(task.TaskID, client.UpdateTaskRequest{ExpectVersion: &v}),
	})
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrVersionMismatch) {
		t.Fatalf("got %v, want version_mismatch *Error", err)
	}
	if i, ok := e.OpIndex(); !ok || i != 1 {
		t.Errorf("got op_index %d %v, want 1", i, ok)
	}
	reqs := p.Requests()
	if got := string(reqs[len(reqs)-1].Body); !strings.Contains(got, `"op":"task.update"`) {
		t.Errorf("request body %s lacks the update op", got)
	}
}
