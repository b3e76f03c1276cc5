package chunkplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/chunkstore"
	"github.com/baton-dev/baton/server/core/node"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeCluster is this node "n1" among members.
type fakeCluster struct{ members []node.MemberInfo }

func (c *fakeCluster) ID() string                          { return "n1" }
func (c *fakeCluster) IsLeader() bool                      { return false }
func (c *fakeCluster) Members() ([]node.MemberInfo, error) { return c.members, nil }
func (c *fakeCluster) Apply(context.Context, *fsm.Command) (*fsm.Result, error) {
	return nil, errors.New("not the leader")
}

// fakePeers answers each peer's internal chunk routes with its handler.
type fakePeers map[string]func(req *http.Request) (*http.Response, error)

func (p fakePeers) URL(addr, path string) string { return "http://" + addr + path }
func (p fakePeers) Do(req *http.Request) (*http.Response, error) {
	return p[req.URL.Host](req)
}

func answer(code int, body []byte) (*http.Response, error) {
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: io.NopCloser(bytes.NewReader(body))}, nil
}

// hang answers only when the request's context ends.
func hang(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, req.Context().Err()
}

func three() *fakeCluster {
	return &fakeCluster{members: []node.MemberInfo{
		{ID: "n1", HTTPAddr: "n1:1", Voter: true},
		{ID: "n2", HTTPAddr: "n2:1", Voter: true},
		{ID: "n3", HTTPAddr: "n3:1", Voter: true},
	}}
}

func newPlane(t *testing.T, c Cluster, peers Peers) *Plane {
	t.Helper()
	return newPlaneBacklog(t, c, peers, 0)
}

func newPlaneBacklog(t *testing.T, c Cluster, peers Peers, backlog int64) *Plane {
	t.Helper()
	store, err := chunkstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	p := New(Config{Store: store, Cluster: c, FSM: fsm.New(), Peers: peers, Now: func() int64 { return time.Now().UnixMilli() },
		GCGrace: time.Hour, RequestTimeout: time.Second, MaxChunkBody: 1 << 20, MaxCopyBacklog: backlog,
		Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(p.Close)
	return p
}

// A majority (this node and n2) is enough; the copy to the hanging n3 is
// left in flight, and Close ends it instead of waiting out its 30 s.
func TestReplicateMajorityThenCloseEndsCopiesInFlight(t *testing.T) {
	var n2Got atomic.Int32
	peers := fakePeers{
		"n2:1": func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodPut || req.URL.Path != "/v1/internal/chunks/sha256:x" {
				return answer(http.StatusNotFound, nil)
			}
			n2Got.Add(1)
			return answer(http.StatusNoContent, nil)
		},
		"n3:1": hang,
	}
	p := newPlane(t, three(), peers)
	if err := p.Replicate(t.Context(), "sha256:x", []byte("body"), nil); err != nil {
		t.Fatalf("Replicate: %v", err)
	}
	if n2Got.Load() != 1 {
		t.Fatalf("n2 got %d copies, want 1", n2Got.Load())
	}
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the copy in flight")
	}
	var u *Unavailable
	if err := p.Replicate(t.Context(), "sha256:x", []byte("body"), nil); !errors.As(err, &u) {
		t.Fatalf("Replicate after Close: %v, want *Unavailable", err)
	}
}

func TestReplicateFailsWithoutMajority(t *testing.T) {
	fail := func(*http.Request) (*http.Response, error) { return answer(http.StatusInternalServerError, nil) }
	p := newPlane(t, three(), fakePeers{"n2:1": fail, "n3:1": fail})
	var u *Unavailable
	err := p.Replicate(t.Context(), "sha256:x", []byte("body"), nil)
	if !errors.As(err, &u) || !strings.Contains(u.Msg, "majority") {
		t.Fatalf("Replicate: %v, want *Unavailable about a majority", err)
	}

	alone := &fakeCluster{members: []node.MemberInfo{{ID: "n1", Voter: true}, {ID: "n2", Voter: true}, {ID: "n3", Voter: true}}}
	p = newPlane(t, alone, fakePeers{})
	err = p.Replicate(t.Context(), "sha256:x", []byte("body"), nil)
	if !errors.As(err, &u) || !strings.Contains(u.Msg, "knows the address of 0 voting peers and needs 1") {
		t.Fatalf("Replicate without peer addresses: %v", err)
	}
}

func TestReplicateReturnsCallersCancellation(t *testing.T) {
	p := newPlane(t, three(), fakePeers{"n2:1": hang, "n3:1": hang})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Replicate(ctx, "sha256:x", []byte("body"), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Replicate: %v, want context.Canceled", err)
	}
}

// Read falls back to a peer, skips a peer's bad copy, and keeps the good one.
func TestReadFetchesVerifiedCopy(t *testing.T) {
	body := []byte("the chunk")
	d := chunkstore.Digest(body)
	peers := fakePeers{
		"n2:1": func(*http.Request) (*http.Response, error) { return answer(http.StatusOK, []byte("tampered")) },
		"n3:1": func(*http.Request) (*http.Response, error) { return answer(http.StatusOK, body) },
	}
	p := newPlane(t, three(), peers)
	got, err := p.Read(t.Context(), d)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Read = %q, %v; want %q", got, err, body)
	}
	if !p.cfg.Store.Has(d) {
		t.Fatal("the fetched body was not stored")
	}
	var u *Unavailable
	if _, err := p.Read(t.Context(), chunkstore.Digest([]byte("nobody has it"))); !errors.As(err, &u) {
		t.Fatalf("Read of a body no peer has: %v, want *Unavailable", err)
	}
}

// Peers receive the stored form with FormHeader; a peer that refuses it
// (one that predates the header finds a digest mismatch) gets the raw
// body instead, and its copy counts.
func TestReplicateSendsTheStoredFormAndFallsBackToRaw(t *testing.T) {
	type got struct{ form, body string }
	n2, n3 := make(chan got, 2), make(chan got, 2)
	peer := func(out chan got, knowsForm bool) func(*http.Request) (*http.Response, error) {
		return func(req *http.Request) (*http.Response, error) {
			b, _ := io.ReadAll(req.Body)
			form := req.Header.Get(FormHeader)
			out <- got{form, string(b)}
			if form != "" && !knowsForm {
				return answer(http.StatusUnprocessableEntity, nil)
			}
			return answer(http.StatusNoContent, nil)
		}
	}
	// Four voters: this node needs both n2's and n3's copies (n4 hangs),
	// so n3's raw copy must count.
	four := &fakeCluster{members: append(three().members, node.MemberInfo{ID: "n4", HTTPAddr: "n4:1", Voter: true})}
	p := newPlane(t, four, fakePeers{"n2:1": peer(n2, true), "n3:1": peer(n3, false), "n4:1": hang})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.Replicate(ctx, "sha256:x", []byte("raw"), []byte("stored")); err != nil {
		t.Fatalf("Replicate: %v", err)
	}
	if g := <-n2; g != (got{FormStored, "stored"}) || len(n2) != 0 {
		t.Fatalf("n2 got %+v (and %d more), want the stored form once", g, len(n2))
	}
	if g1, g2 := <-n3, <-n3; g1 != (got{FormStored, "stored"}) || g2 != (got{"", "raw"}) {
		t.Fatalf("n3 got %+v then %+v, want the stored form, then the raw body", g1, g2)
	}
}

// TestCopiesLeftInFlightAreBounded: the copies to a peer that never
// answers (n3, paused) outlive the uploads they belong to; they hold their
// bodies only up to MaxCopyBacklog bytes together, and a copy that would
// go past it is stopped at once (before, each stayed for its 30 s, so an
// upload rate times 30 s of bodies piled up in memory).
func TestCopiesLeftInFlightAreBounded(t *testing.T) {
	var n3Open atomic.Int32
	peers := fakePeers{
		"n2:1": func(*http.Request) (*http.Response, error) { return answer(http.StatusNoContent, nil) },
		"n3:1": func(req *http.Request) (*http.Response, error) {
			n3Open.Add(1)
			defer n3Open.Add(-1)
			return hang(req)
		},
	}
	p := newPlaneBacklog(t, three(), peers, 10)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) { // polling interval, bounded by deadline
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: backlog %d bytes, %d copies stopped, %d open at n3",
					what, p.CopyBacklog(), p.CopiesStopped(), n3Open.Load())
			}
		}
	}
	for i := range 2 {
		if err := p.Replicate(t.Context(), fmt.Sprintf("sha256:%d", i), []byte("body"), nil); err != nil {
			t.Fatalf("Replicate %d: %v", i, err)
		}
	}
	waitFor("two copies open at n3", func() bool { return n3Open.Load() == 2 })
	if p.CopyBacklog() != 8 || p.CopiesStopped() != 0 {
		t.Fatalf("after two uploads: backlog %d bytes, %d stopped; want 8 and 0", p.CopyBacklog(), p.CopiesStopped())
	}
	// A third body would make 12 bytes, over the 10 allowed: its copy to
	// n3 is stopped; the two before it go on.
	if err := p.Replicate(t.Context(), "sha256:2", []byte("body"), nil); err != nil {
		t.Fatalf("Replicate 2: %v", err)
	}
	if p.CopiesStopped() != 1 {
		t.Fatalf("%d copies stopped, want 1", p.CopiesStopped())
	}
	waitFor("the stopped copy to end", func() bool { return p.CopyBacklog() == 8 && n3Open.Load() == 2 })
	p.Close()
	if p.CopyBacklog() != 0 || n3Open.Load() != 0 {
		t.Fatalf("after Close: backlog %d bytes, %d copies open at n3; want 0 and 0", p.CopyBacklog(), n3Open.Load())
	}
}
