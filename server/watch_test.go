package server

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// watchNode is a one-node server (fakeCluster) with tenant acme and a
// principal "kv-reader" (token "kv-token") that may read only kv.
func watchNode(t *testing.T, catchUpWait time.Duration) (*Server, *fsm.FSM) {
	t.Helper()
	f := fsm.New()
	c := &fakeCluster{f: f}
	s := New(Config{AdminToken: testAdminToken, CatchUpWait: catchUpWait, Logger: slog.New(slog.DiscardHandler)}, c, f)
	t.Cleanup(s.Close)
	if res, err := c.Apply(context.Background(), fsm.NewCommand(fsm.KindTenantPut, 1, "acme", "", &fsm.TenantPutArgs{Name: "acme"})); err != nil || !res.OK() {
		t.Fatalf("tenant: %v %+v", err, res)
	}
	pc := &fsm.PrincipalCreateArgs{Name: "kv-reader", TokenHash: hashToken("kv-token"), TokenSalt: "00",
		Grants: []fsm.Grant{{Resource: "kv", Actions: []string{"read"}}}}
	if res, err := c.Apply(context.Background(), fsm.NewCommand(fsm.KindPrincipalCreate, 1, "acme", "", pc)); err != nil || !res.OK() {
		t.Fatalf("principal: %v %+v", err, res)
	}
	return s, f
}

// TestWatchValidatesBeforeWaiting: a watch is authorized and validated
// before the node waits to catch up with its resume point. A resume point
// far ahead with a resource the caller may not read is 403, with an
// unknown resource or a malformed Last-Event-ID 400, at once; before, the
// first two waited the catch-up wait (here longer than the request) and
// answered 503.
func TestWatchValidatesBeforeWaiting(t *testing.T) {
	s, f := watchNode(t, time.Hour)
	ahead := f.AppliedIndex() + 1000
	for _, tc := range []struct {
		name, token, query, lastEventID string
		want                            int
	}{
		{"no grant", "kv-token", fmt.Sprintf("resources=tasks&from_index=%d", ahead), "", http.StatusForbidden},
		{"unknown resource", testAdminToken, fmt.Sprintf("resources=nope&from_index=%d", ahead), "", http.StatusBadRequest},
		{"bad Last-Event-ID", testAdminToken, "resources=kv", "x.y", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, "GET", "/v1/tenants/acme/watch?"+tc.query, nil)
			req.Header.Set("Authorization", "Bearer "+tc.token)
			if tc.lastEventID != "" {
				req.Header.Set("Last-Event-ID", tc.lastEventID)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("got %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
		})
	}
}

// TestWatchOpensAtOnce: a watch of a quiet tenant answers its head (200,
// X-Baton-Index: the index it starts after) and a first comment line
// naming that index before any event or keepalive, so that a client or
// proxy reading the body sees at once that the stream is established.
// Before, the head came at once but the body's first bytes only with the
// first event or the keepalive 10 s later.
func TestWatchOpensAtOnce(t *testing.T) {
	s, f := watchNode(t, time.Second)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	for _, tok := range []string{testAdminToken, "kv-token"} {
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		req, err := http.NewRequestWithContext(ctx, "GET", hs.URL+"/v1/tenants/acme/watch?resources=kv", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		index, _ := strconv.ParseUint(resp.Header.Get("X-Baton-Index"), 10, 64)
		if resp.StatusCode != http.StatusOK || index != f.AppliedIndex() {
			t.Errorf("got %d X-Baton-Index %q, want 200 and the applied index %d", resp.StatusCode, resp.Header.Get("X-Baton-Index"), f.AppliedIndex())
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if want := fmt.Sprintf(": watching after index %d\n", index); line != want || err != nil {
			t.Errorf("first line %q (%v), want %q", line, err, want)
		}
		cancel()
		resp.Body.Close()
	}
}
