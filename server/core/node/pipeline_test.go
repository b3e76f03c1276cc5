package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/hashicorp/raft"
)

// fakeVoter is a voter answering Raft RPCs on hashicorp/raft's own
// transport: it grants every vote, keeps only the index of its last entry,
// and, if refuseEvery is set, refuses every refuseEvery-th AppendEntries
// that carries entries (Success=false, as a follower whose log store
// failed answers). Each refusal makes the leader drop its replication
// pipeline, if it has one, and resend from the last index the voter names.
type fakeVoter struct {
	tr          *raft.NetworkTransport
	id          string
	refuseEvery int

	mu      sync.Mutex
	last    uint64 // index of the last entry held
	appends int    // AppendEntries with entries
	refused int
}

func newFakeVoter(t *testing.T, id string, refuseEvery int) *fakeVoter {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeTransport(tr) })
	return &fakeVoter{tr: tr, id: id, refuseEvery: refuseEvery}
}

func (f *fakeVoter) lastIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeVoter) serve(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case rpc := <-f.tr.Consumer():
			if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok && len(req.Entries) > 0 {
				// A follower's log write: what keeps a pipeline's next request
				// on the wire while one is being answered.
				time.Sleep(time.Millisecond)
			}
			rpc.Respond(f.answer(rpc.Command), nil)
		}
	}
}

func (f *fakeVoter) answer(cmd any) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch req := cmd.(type) {
	case *raft.RequestPreVoteRequest:
		return &raft.RequestPreVoteResponse{RPCHeader: f.header(), Term: req.Term, Granted: true}
	case *raft.RequestVoteRequest:
		return &raft.RequestVoteResponse{RPCHeader: f.header(), Term: req.Term, Granted: true}
	case *raft.AppendEntriesRequest:
		resp := &raft.AppendEntriesResponse{RPCHeader: f.header(), Term: req.Term, LastLog: f.last}
		if req.PrevLogEntry > f.last {
			return resp // a gap: the leader backs up to LastLog
		}
		if len(req.Entries) > 0 {
			f.appends++
			if f.refuseEvery > 0 && f.appends%f.refuseEvery == 0 {
				f.refused++
				return resp
			}
			f.last = max(f.last, req.Entries[len(req.Entries)-1].Index)
		}
		resp.Success, resp.LastLog = true, f.last
		return resp
	case *raft.TimeoutNowRequest: // never sent here: n1 is the only member that leads
		return &raft.TimeoutNowResponse{RPCHeader: f.header()}
	}
	return nil
}

func (f *fakeVoter) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(f.id), Addr: []byte(f.tr.LocalAddr())}
}

// openWithFakeVoters opens node n1 of a cluster whose other voters are
// fakes.
func openWithFakeVoters(t *testing.T, pipeline bool, fakes ...*fakeVoter) *Node {
	t.Helper()
	addr := freeAddr(t)
	peers := []raft.Server{{ID: "n1", Address: raft.ServerAddress(addr), Suffrage: raft.Voter}}
	for _, f := range fakes {
		peers = append(peers, raft.Server{ID: raft.ServerID(f.id), Address: f.tr.LocalAddr(), Suffrage: raft.Voter})
	}
	cfg := DefaultConfig()
	cfg.ID, cfg.DataDir = "n1", filepath.Join(t.TempDir(), "n1")
	cfg.RaftAddr, cfg.HTTPAddr, cfg.Peers = addr, "127.0.0.1:0", peers
	cfg.Logger = discardLog
	cfg.SnapshotInterval, cfg.SnapshotThreshold = time.Hour, 1<<40
	// Not a test of timing: a fake answers heartbeats behind its appends,
	// so a loaded machine must not cost n1 its lease.
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	cfg.RaftPipeline = pipeline
	nd, err := Open(cfg, fsm.New())
	if err != nil {
		t.Fatal(err)
	}
	return nd
}

// With pipelining off (the default), a follower that refuses appends now
// and then is sent entries again each time, and catches up once the
// writes stop. hashicorp/raft v1.7.3's pipeline, on instead, can park its
// sender for good after such a refusal when a new entry is already
// waiting, as it is while the healthy follower keeps commits going
// (grafana/pyroscope#5518): the refusing follower then gets heartbeats
// and no more entries, and the node's Close waits for the parked sender.
// BATON_TEST_RAFT_PIPELINE=1 runs it with pipelining on, to see whether a
// newer hashicorp/raft still has the bug: it then fails (the follower
// stalls, Close does not return, and goleak reports the parked goroutines).
func TestRaftReplicationSurvivesRefusedAppends(t *testing.T) {
	pipeline := os.Getenv("BATON_TEST_RAFT_PIPELINE") == "1"
	flaky := newFakeVoter(t, "n2", 7)
	healthy := newFakeVoter(t, "n3", 0)
	done := make(chan struct{})
	var served sync.WaitGroup
	t.Cleanup(func() { close(done); served.Wait() })
	for _, f := range []*fakeVoter{flaky, healthy} {
		served.Add(1)
		go func() { defer served.Done(); f.serve(done) }()
	}
	nd := openWithFakeVoters(t, pipeline, flaky, healthy)
	defer func() {
		closed := make(chan error, 1)
		go func() { closed <- nd.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("close: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the node did not close within 10 s")
		}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for !nd.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("n1 was not elected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// 8 writers for 3 s: with the healthy follower's acknowledgements,
	// entries keep coming while the leader handles a refusal.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stop := time.Now().Add(3 * time.Second)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				name := fmt.Sprintf("t%d-%d", w, i)
				res, err := nd.Apply(ctx, fsm.NewCommand(fsm.KindTenantPut, 1, name, "", &fsm.TenantPutArgs{Name: name}))
				cancel()
				if err == nil && !res.OK() {
					err = errors.New(res.Message)
				}
				if err != nil {
					errs <- fmt.Errorf("write %s: %w", name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := nd.raft.LastIndex()
	deadline = time.Now().Add(10 * time.Second) // a stalled follower never catches up
	for flaky.lastIndex() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	flaky.mu.Lock()
	last, refused, appends := flaky.last, flaky.refused, flaky.appends
	flaky.mu.Unlock()
	if last < want {
		t.Errorf("the refusing follower holds entries up to %d, the leader up to %d: its replication stalled", last, want)
	}
	if refused < 5 {
		t.Errorf("the follower refused %d of %d appends: the test did not exercise refusals", refused, appends)
	}
	t.Logf("the refusing follower: %d appends with entries, %d refused; %d entries", appends, refused, want)
}

// freeAddr is a 127.0.0.1 port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
