package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

var allSentinels = []error{
	client.ErrInvalidArgument, client.ErrDigestMismatch, client.ErrMissingChunks,
	client.ErrUnauthenticated, client.ErrForbidden, client.ErrNotFound,
	client.ErrAlreadyExists, client.ErrLeaseHeld, client.ErrFenced,
	client.ErrVersionMismatch, client.ErrIdempotencyMismatch, client.ErrCompacted,
	client.ErrTooLarge, client.ErrUnavailable,
}

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		status int
		code   string
		want   error
	}{
		{400, "invalid_argument", client.ErrInvalidArgument},
		{400, "digest_mismatch", client.ErrDigestMismatch},
		{400, "missing_chunks", client.ErrMissingChunks},
		{401, "unauthenticated", client.ErrUnauthenticated},
		{403, "forbidden", client.ErrForbidden},
		{404, "not_found", client.ErrNotFound},
		{409, "already_exists", client.ErrAlreadyExists},
		{409, "lease_held", client.ErrLeaseHeld},
		{409, "fenced", client.ErrFenced},
		{409, "version_mismatch", client.ErrVersionMismatch},
		{409, "idempotency_mismatch", client.ErrIdempotencyMismatch},
		{410, "compacted", client.ErrCompacted},
		{413, "too_large", client.ErrTooLarge},
		{503, "unavailable", client.ErrUnavailable},
	}
	if len(cases) != len(allSentinels) {
		t.Fatalf("table covers %d codes, want all %d", len(cases), len(allSentinels))
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			h := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Baton-Index", "42")
				writeError(w, tc.status, tc.code, "it went wrong", map[string]any{"extra": "x"})
			}
			c := newClientCfg(t, client.Config{Endpoints: []string{serve(t, h).URL}, MaxRetry: time.Millisecond})
			_, err := c.GetTask(context.Background(), "acme", "t1")
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
			if e.Status != tc.status || e.Code != tc.code || e.Message != "it went wrong" || e.Index != 42 {
				t.Errorf("got %+v, want status %d code %s message %q index 42", e, tc.status, tc.code, "it went wrong")
			}
			if s, _ := e.DetailString("extra"); s != "x" {
				t.Errorf("got detail extra=%q, want x", s)
			}
		})
	}
}

func TestErrorDetails(t *testing.T) {
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
	rec := &recorder{reply: func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeError(w, 409, "version_mismatch", "expect_version 3, current 4",
			map[string]any{"op_index": 1, "current_version": 4})
	}}
	c := newClient(t, serve(t, rec.ServeHTTP).URL)
	v := uint64(3)
	_, err := c.Txn(context.Background(), "acme", []client.TxnOp{
		client.TxnCreateTask(client.CreateTaskRequest{TaskID: "next", Queue: "review"}),
		client.TxnUpdateTask("t1", client.UpdateTaskRequest{ExpectVersion: &v}),
	})
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrVersionMismatch) {
		t.Fatalf("got %v, want version_mismatch *Error", err)
	}
	if i, ok := e.OpIndex(); !ok || i != 1 {
		t.Errorf("got op_index %d %v, want 1", i, ok)
	}
	if got := string(rec.requests()[0].Body); !strings.Contains(got, `"op":"task.update"`) {
		t.Errorf("request body %s lacks the update op", got)
	}
}
