package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// A watch whose resume point this node has not applied yet is 503 (retry,
// perhaps elsewhere) once the catch-up wait is over, not an answer from
// state older than what the client has seen; one this node has reached
// streams.
func TestWatchAheadOfThisNode(t *testing.T) {
	f := fsm.New()
	c := &fakeCluster{f: f}
	const wait = 100 * time.Millisecond
	s := New(Config{AdminToken: testAdminToken, CatchUpWait: wait, Logger: slog.New(slog.DiscardHandler)}, c, f)
	if res, err := c.Apply(context.Background(), fsm.NewCommand(fsm.KindTenantPut, 1, "acme", "", &fsm.TenantPutArgs{Name: "acme"})); err != nil || !res.OK() {
		t.Fatalf("tenant: %v %+v", err, res)
	}
	applied := f.AppliedIndex()
	for _, tc := range []struct {
		name, query, lastEventID string
		want                     int
	}{
		{"from_index ahead", fmt.Sprintf("?from_index=%d", applied+5), "", 503},
		{"Last-Event-ID ahead", "", fmt.Sprintf("%d.0", applied+5), 503},
		{"from_index reached", fmt.Sprintf("?from_index=%d", applied), "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*wait)
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, "GET", "/v1/tenants/acme/watch"+tc.query, nil)
			req.Header.Set("Authorization", "Bearer "+testAdminToken)
			if tc.lastEventID != "" {
				req.Header.Set("Last-Event-ID", tc.lastEventID)
			}
			rec := httptest.NewRecorder()
			start := time.Now()
			s.Handler().ServeHTTP(rec, req) // a stream returns when ctx ends
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tc.want, rec.Body)
			}
			if tc.want != 503 {
				return
			}
			var body struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code != "unavailable" {
				t.Fatalf("body %s (%v), want an unavailable error", rec.Body, err)
			}
			if d := time.Since(start); d < wait {
				t.Fatalf("answered after %v, before the catch-up wait of %v", d, wait)
			}
		})
	}
}
