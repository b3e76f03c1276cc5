package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/chunkstore"
	"github.com/baton-dev/baton/server/core/node"
	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Test cluster timings: fast enough that an election takes well under a
// second, slow enough for -race on a loaded machine.
const (
	testAdminToken     = "admin-secret"
	testHeartbeat      = 250 * time.Millisecond
	testElection       = 250 * time.Millisecond
	testLeaderLease    = 125 * time.Millisecond
	testCommit         = 10 * time.Millisecond
	testRequestTimeout = 2 * time.Second
	waitTimeout        = 15 * time.Second
	pollInterval       = 10 * time.Millisecond
)

// testNode is one in-process cluster member: FSM, Raft node, HTTP server.
type testNode struct {
	id       string
	cfg      node.Config
	fsm      *fsm.FSM
	node     *node.Node
	srv      *Server
	chunks   *chunkstore.Store
	hs       *httptest.Server
	running  bool
	httpAddr string
}

// testCluster is an in-process Baton cluster on 127.0.0.1.
type testCluster struct {
	t      testing.TB
	nodes  []*testNode
	client *http.Client
	log    *slog.Logger
	// requestTimeout is the servers' RequestTimeout.
	requestTimeout time.Duration
	// bodyTimeout is the servers' BodyTimeout (0: its default).
	bodyTimeout time.Duration
	// nodeConfig, if set, adjusts each node's configuration before it
	// first starts.
	nodeConfig func(*node.Config)
	// serverConfig, if set, adjusts each server's configuration.
	serverConfig func(*Config)
	// chunkCompression is the nodes' chunk store compression ("": the
	// default, none).
	chunkCompression chunkstore.Compression
}

// newCluster starts n bootstrapped nodes and waits until they have a leader
// and every node knows every node's HTTP address. configure, if given, sets
// the cluster's fields before any node starts.
func newCluster(t testing.TB, n int, configure ...func(*testCluster)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, log: testLogger(t), requestTimeout: testRequestTimeout,
		client: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second,
			// Show redirects to the test instead of following them.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, f := range configure {
		f(c)
	}
	ports := freePorts(t, 2*n)
	var peers []raft.Server
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		peers = append(peers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(ports[2*i]), Suffrage: raft.Voter})
	}
	for i := range n {
		cfg := node.DefaultConfig()
		cfg.ID = string(peers[i].ID)
		cfg.DataDir = filepath.Join(t.TempDir(), cfg.ID)
		cfg.RaftAddr = ports[2*i]
		cfg.HTTPAddr = ports[2*i+1]
		cfg.Peers = peers
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = testHeartbeat, testElection
		cfg.LeaderLeaseTimeout, cfg.CommitTimeout = testLeaderLease, testCommit
		cfg.SnapshotThreshold = 1 << 40 // snapshots only when a test asks
		cfg.SnapshotInterval = time.Hour
		cfg.ApplyTimeout = testRequestTimeout
		cfg.Logger = c.log.With("node", cfg.ID)
		if c.nodeConfig != nil {
			c.nodeConfig(&cfg)
		}
		c.nodes = append(c.nodes, &testNode{id: cfg.ID, cfg: cfg, httpAddr: cfg.HTTPAddr})
	}
	t.Cleanup(c.close)
	for i := range c.nodes {
		c.startNode(i)
	}
	c.WaitForLeader(t)
	return c
}

// freePorts returns n distinct free 127.0.0.1 addresses. The listeners are
// all held until every port is picked, so the n are distinct.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("picking a free port: %v", err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// startNode opens node i on its data dir and ports.
func (c *testCluster) startNode(i int) {
	c.t.Helper()
	tn := c.nodes[i]
	if tn.running {
		c.t.Fatalf("node %s is already running", tn.id)
	}
	tn.fsm = fsm.New()
	nd, err := node.Open(tn.cfg, tn.fsm)
	if err != nil {
		c.t.Fatalf("node.Open(%s): %v", tn.id, err)
	}
	tn.node = nd
	var opts []chunkstore.Option
	if c.chunkCompression != "" {
		opts = append(opts, chunkstore.WithCompression(c.chunkCompression))
	}
	chunks, err := chunkstore.Open(filepath.Join(tn.cfg.DataDir, "chunks"), opts...)
	if err != nil {
		nd.Close()
		c.t.Fatalf("chunk store of %s: %v", tn.id, err)
	}
	tn.chunks = chunks
	scfg := Config{AdminToken: testAdminToken, RequestTimeout: c.requestTimeout, BodyTimeout: c.bodyTimeout, Chunks: chunks,
		Logger: tn.cfg.Logger}
	if c.serverConfig != nil {
		c.serverConfig(&scfg)
	}
	tn.srv = New(scfg, nd, tn.fsm)
	tn.srv.Start()
	tn.hs = httptest.NewUnstartedServer(tn.srv.Handler())
	tn.hs.Listener.Close()
	ln, err := net.Listen("tcp", tn.httpAddr)
	if err != nil {
		tn.srv.Close()
		chunks.Close()
		nd.Close()
		c.t.Fatalf("HTTP listen for %s on %s: %v", tn.id, tn.httpAddr, err)
	}
	tn.hs.Listener = ln
	tn.hs.Config.ErrorLog = slog.NewLogLogger(tn.cfg.Logger.Handler(), slog.LevelWarn)
	tn.hs.Start()
	tn.running = true
}

// StopNode closes node i: Raft first (so waiting requests end at once),
// then its HTTP server, then the server's background work and chunk store.
func (c *testCluster) StopNode(i int) {
	c.t.Helper()
	tn := c.nodes[i]
	if !tn.running {
		return
	}
	tn.running = false
	if err := tn.node.Close(); err != nil {
		c.t.Errorf("closing node %s: %v", tn.id, err)
	}
	tn.hs.Close()
	tn.srv.Close()
	tn.chunks.Close()
}

// RestartNode reopens a stopped node i on the same data dir and ports.
func (c *testCluster) RestartNode(i int) {
	c.t.Helper()
	c.StopNode(i)
	c.startNode(i)
}

func (c *testCluster) close() {
	for i := range c.nodes {
		c.StopNode(i)
	}
	c.client.CloseIdleConnections()
}

// Leader returns the index of a running node that believes it leads, or -1.
func (c *testCluster) Leader() int {
	for i, tn := range c.nodes {
		if tn.running && tn.node.IsLeader() {
			return i
		}
	}
	return -1
}

// Followers returns the indexes of the running nodes other than leader.
func (c *testCluster) Followers(leader int) []int {
	var out []int
	for i, tn := range c.nodes {
		if tn.running && i != leader {
			out = append(out, i)
		}
	}
	return out
}

// WaitForLeader waits until exactly one running node leads, every running
// node names it, it serves linearizable reads (its term barrier applied)
// and every running node knows every running node's HTTP address, so
// forwarding works from anywhere. It returns the leader's index.
func (c *testCluster) WaitForLeader(t testing.TB) int {
	t.Helper()
	leader := -1
	waitFor(t, "a leader known to every running node", func() string {
		leader = -1
		for i, tn := range c.nodes {
			if !tn.running || !tn.node.IsLeader() {
				continue
			}
			if leader >= 0 {
				return fmt.Sprintf("both %s and %s lead", c.nodes[leader].id, tn.id)
			}
			leader = i
		}
		if leader < 0 {
			return "no running node leads"
		}
		lid := c.nodes[leader].id
		for _, tn := range c.nodes {
			if !tn.running {
				continue
			}
			if got, _ := tn.node.Leader(); got != lid {
				return fmt.Sprintf("%s names leader %q, want %q", tn.id, got, lid)
			}
			for _, other := range c.nodes {
				if other.running && tn.node.HTTPAddrOf(other.id) != other.httpAddr {
					return fmt.Sprintf("%s does not know %s's HTTP address yet", tn.id, other.id)
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := c.nodes[leader].node.ReadBarrier(ctx); err != nil {
			return fmt.Sprintf("leader %s read barrier: %v", lid, err)
		}
		return ""
	})
	return leader
}

// WaitConverged waits until every running node reports the same applied
// index and state digest, and returns that status.
func (c *testCluster) WaitConverged(t testing.TB) fsm.Status {
	t.Helper()
	var st fsm.Status
	waitFor(t, "all running nodes at the same applied index and digest", func() string {
		first := true
		for _, tn := range c.nodes {
			if !tn.running {
				continue
			}
			s := tn.fsm.Status()
			if first {
				st, first = s, false
				continue
			}
			if s.AppliedIndex != st.AppliedIndex || s.StateDigest != st.StateDigest {
				return fmt.Sprintf("%s at %d %s, another at %d %s", tn.id, s.AppliedIndex, s.StateDigest,
					st.AppliedIndex, st.StateDigest)
			}
		}
		return ""
	})
	return st
}

// waitFor polls cond until it returns "" or waitTimeout passes; cond
// returns why it is not yet satisfied.
func waitFor(t testing.TB, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", waitTimeout, what, why)
		}
		time.Sleep(pollInterval)
	}
}

// do sends one request to node i and returns the status, headers and body.
// body is nil, a string, a []byte or a value encoded as JSON. headers are
// set as given; pass adminAuth() or bearer(tok) to authenticate.
func (c *testCluster) do(t testing.TB, i int, method, path string, body any, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("encoding request body: %v", err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, "http://"+c.nodes[i].httpAddr+path, rd)
	if err != nil {
		t.Fatalf("building %s %s: %v", method, path, err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, c.nodes[i].id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s on %s: reading body: %v", method, path, c.nodes[i].id, err)
	}
	return resp.StatusCode, resp.Header, b
}

func adminAuth() map[string]string { return bearer(testAdminToken) }

func bearer(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

// with returns a copy of h with more header pairs (key, value, ...).
func with(h map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// errorCode returns the code of an API error body, or "" if it is not one.
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

// decodeBody decodes a JSON response body into v or fails the test.
func decodeBody(t testing.TB, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
}

// requestsTotal sums baton_http_requests_total of one server.
func requestsTotal(t testing.TB, s *Server) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "baton_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// testLogger routes slog (and so raft's hclog) output at warn and above to
// t.Log. Lines that arrive after the test ended (from goroutines that
// outlive their node, see TestMain) are dropped instead of panicking.
func testLogger(t testing.TB) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(w.stop) // registered first, so it runs after every other cleanup
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testLogWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
