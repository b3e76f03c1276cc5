package concurrency_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

var bg = context.Background()

// newClient builds a client with a short per-attempt timeout and retry budget.
func newClient(t *testing.T, endpoints ...string) *client.Client {
	t.Helper()
	return newClientCfg(t, client.Config{Endpoints: endpoints, Token: "tok",
		Timeout: 2 * time.Second, MaxRetry: 5 * time.Second})
}

func newClientCfg(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// serve starts a fake node, for the faults a real one cannot be made to
// show on cue (a renewal answered 503, a slow claim). It has no client
// sessions, as a server from before them: the client then sends a random
// Idempotency-Key with every write.
func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sessions" {
			writeError(w, http.StatusNotFound, "not_found", "no such endpoint", nil)
			return
		}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	obj := map[string]any{"code": code, "message": msg}
	for k, v := range details {
		obj[k] = v
	}
	writeJSON(w, status, map[string]any{"error": obj})
}

func unavailable(w http.ResponseWriter, _ *http.Request, _ int) {
	w.Header().Set("Retry-After", "0")
	writeError(w, 503, "unavailable", "no leader", nil)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
