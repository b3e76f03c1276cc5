package clustertest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/baton-dev/baton/client"
)

// Stub starts an HTTP server that answers with h, without client sessions
// (POST /v1/sessions is a 404, as on a server from before them). It is for
// the few tests whose subject a real batond cannot produce, such as a
// broken or hostile answer; each says why where it calls Stub. The test's
// cleanup stops it.
func Stub(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sessions" {
			WriteError(w, http.StatusNotFound, "not_found", "no such endpoint", nil)
			return
		}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers an API error body: code, message and details.
func WriteError(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	obj := map[string]any{"code": code, "message": msg}
	for k, v := range details {
		obj[k] = v
	}
	WriteJSON(w, status, map[string]any{"error": obj})
}

// NewClient is client.New that fails the test on an error.
func NewClient(t testing.TB, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}
