package cluster

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/baton-dev/baton/client"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Binary: "/bin/batond", BaseDir: "/tmp/x"}
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"five nodes with ports", func(c *Config) {
			c.Nodes = 5
			c.HTTPPorts, c.RaftPorts = SequentialPorts(7001, 5), SequentialPorts(8001, 5)
		}, ""},
		{"hosts with ports", func(c *Config) {
			c.Hosts = []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"}
			c.HTTPPorts, c.RaftPorts = SequentialPorts(7001, 3), SequentialPorts(8001, 3)
		}, ""},
		{"hosts without ports", func(c *Config) { c.Hosts = []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"} }, "needs HTTPPorts and RaftPorts"},
		{"hosts for two of three", func(c *Config) {
			c.Hosts = []string{"10.1.0.1", "10.1.0.2"}
			c.HTTPPorts, c.RaftPorts = SequentialPorts(7001, 3), SequentialPorts(8001, 3)
		}, "Config.Hosts has 2 addresses, want 3"},
		{"host with a port", func(c *Config) {
			c.Hosts = []string{"10.1.0.1:1", "10.1.0.2", "10.1.0.3"}
			c.HTTPPorts, c.RaftPorts = SequentialPorts(7001, 3), SequentialPorts(8001, 3)
		}, "is not a host name"},
		{"no binary", func(c *Config) { c.Binary = "" }, "Config.Binary is required"},
		{"no base dir", func(c *Config) { c.BaseDir = "" }, "Config.BaseDir is required"},
		{"negative nodes", func(c *Config) { c.Nodes = -1 }, "Config.Nodes is -1, want 1 to 9"},
		{"too many nodes", func(c *Config) { c.Nodes = 10 }, "Config.Nodes is 10, want 1 to 9"},
		{"short port list", func(c *Config) { c.HTTPPorts = []int{7001} }, "Config.HTTPPorts has 1 ports, want 3"},
		{"port out of range", func(c *Config) { c.RaftPorts = []int{8001, 8002, 70000} }, "port 70000 out of range"},
		{"duplicate port", func(c *Config) { c.HTTPPorts = []int{7001, 7002, 7001} }, "port 7001 appears twice"},
		{"http and raft overlap", func(c *Config) {
			c.HTTPPorts, c.RaftPorts = []int{7001, 7002, 7003}, []int{7003, 7004, 7005}
		}, "port 7003 is in both"},
		{"token with space", func(c *Config) { c.AdminToken = "a b" }, "white space"},
		{"negative stop timeout", func(c *Config) { c.StopTimeout = -1 }, "StopTimeout"},
		{"runtime procs", func(c *Config) { c.Procs = ProcsRuntime; c.Env = []string{"GODEBUG=x=1"} }, ""},
		{"unknown procs rule", func(c *Config) { c.Procs = 7 }, "Config.Procs is ProcsRule(7)"},
		{"runtime procs set in Env", func(c *Config) { c.Procs = ProcsRuntime; c.Env = []string{"GOMAXPROCS=2"} },
			"sets GOMAXPROCS=2 with Procs ProcsRuntime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
			if _, nerr := New(c); (nerr == nil) != (err == nil) {
				t.Fatalf("New() = %v, Validate() = %v: want both to agree", nerr, err)
			}
		})
	}
}

func TestNewAppliesDefaultsWithoutIO(t *testing.T) {
	base := filepath.Join(t.TempDir(), "not-yet")
	c, err := New(Config{Binary: "/nonexistent/batond", BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Size() != DefaultNodes {
		t.Errorf("Size() = %d, want %d", c.Size(), DefaultNodes)
	}
	if len(c.AdminToken()) != 64 {
		t.Errorf("generated token %q, want 64 hex digits", c.AdminToken())
	}
	if _, err := os.Stat(base); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New created %s (stat: %v), want no I/O", base, err)
	}
	if got, want := c.LogPath(1), filepath.Join(base, "n2", "batond.log"); got != want {
		t.Errorf("LogPath(1) = %s, want %s", got, want)
	}
	if got, want := c.DataDir(2), filepath.Join(base, "n3", "data"); got != want {
		t.Errorf("DataDir(2) = %s, want %s", got, want)
	}
	if err := c.Kill(3); !errors.Is(err, ErrNoSuchNode) {
		t.Errorf("Kill(3) = %v, want ErrNoSuchNode", err)
	}
	if err := c.Kill(0); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Kill(0) before Start = %v, want ErrNotRunning", err)
	}
	if err := c.Restart(t.Context(), 0); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Restart(0) before Start = %v, want ErrNotRunning", err)
	}
}

func TestStartReportsAMissingBinary(t *testing.T) {
	c, err := New(Config{Binary: "/nonexistent/batond", BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "n1") || !strings.Contains(err.Error(), "/nonexistent/batond") {
		t.Fatalf("Start = %v, want an error naming n1 and the binary", err)
	}
}

func TestConfiguredPortsAndEndpoints(t *testing.T) {
	c, err := New(Config{Binary: "b", BaseDir: "d", HTTPPorts: []int{7001, 7002, 7003}, RaftPorts: []int{8001, 8002, 8003}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Endpoints(), []string{"http://127.0.0.1:7001", "http://127.0.0.1:7002", "http://127.0.0.1:7003"}; !slices.Equal(got, want) {
		t.Errorf("Endpoints() = %v, want %v", got, want)
	}
	if got, want := c.HTTPAddr(1), "127.0.0.1:7002"; got != want {
		t.Errorf("HTTPAddr(1) = %s, want %s", got, want)
	}
	if got, want := c.RaftAddr(2), "127.0.0.1:8003"; got != want {
		t.Errorf("RaftAddr(2) = %s, want %s", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("URL(3) did not panic")
		}
	}()
	c.URL(3)
}

func TestPeersFlag(t *testing.T) {
	tests := []struct {
		ports []int
		want  string
	}{
		{[]int{8001}, "n1=127.0.0.1:8001"},
		{[]int{8001, 8002, 8003}, "n1=127.0.0.1:8001,n2=127.0.0.1:8002,n3=127.0.0.1:8003"},
		{[]int{9005, 9001}, "n1=127.0.0.1:9005,n2=127.0.0.1:9001"},
	}
	for _, tt := range tests {
		if got := PeersFlag(tt.ports); got != tt.want {
			t.Errorf("PeersFlag(%v) = %q, want %q", tt.ports, got, tt.want)
		}
	}
}

func TestNodeArgs(t *testing.T) {
	peers := "n1=127.0.0.1:8001,n2=127.0.0.1:8002"
	tests := []struct {
		name string
		cfg  Config
		join string
		want []string
	}{
		{"bootstrap", Config{}, "", []string{
			"--id=n2", "--data-dir=/d/n2/data", "--http-addr=127.0.0.1:7002", "--raft-addr=127.0.0.1:8002",
			"--peers=" + peers,
		}},
		{"join has no peers", Config{}, "http://127.0.0.1:7001", []string{
			"--id=n2", "--data-dir=/d/n2/data", "--http-addr=127.0.0.1:7002", "--raft-addr=127.0.0.1:8002",
			"--join=http://127.0.0.1:7001",
		}},
		{"fast, then extra args last", Config{Fast: true, ExtraArgs: []string{"--log-level=debug", "--election-timeout=1s"}}, "", []string{
			"--id=n2", "--data-dir=/d/n2/data", "--http-addr=127.0.0.1:7002", "--raft-addr=127.0.0.1:8002",
			"--peers=" + peers,
			"--heartbeat-timeout=300ms", "--election-timeout=300ms", "--leader-lease-timeout=150ms", "--commit-timeout=20ms",
			"--log-level=debug", "--election-timeout=1s",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nodeArgs(tt.cfg, "n2", "/d/n2/data", 7002, 8002, peers, tt.join)
			if !slices.Equal(got, tt.want) {
				t.Errorf("nodeArgs =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestNodeArgsHosts: with Config.Hosts each node listens on, and its peers
// dial, its own address (nodes in network namespaces).
func TestNodeArgsHosts(t *testing.T) {
	hosts := []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"}
	cfg := Config{Hosts: hosts}
	peers := peersFlag(hosts, []int{8001, 8002, 8003})
	if want := "n1=10.1.0.1:8001,n2=10.1.0.2:8002,n3=10.1.0.3:8003"; peers != want {
		t.Errorf("peersFlag = %q, want %q", peers, want)
	}
	got := nodeArgs(cfg, "n2", "/d/n2/data", 7002, 8002, peers, "")
	want := []string{"--id=n2", "--data-dir=/d/n2/data", "--http-addr=10.1.0.2:7002", "--raft-addr=10.1.0.2:8002", "--peers=" + peers}
	if !slices.Equal(got, want) {
		t.Errorf("nodeArgs =\n%q\nwant\n%q", got, want)
	}
}

func TestSequentialPortsAndNodeID(t *testing.T) {
	if got, want := SequentialPorts(7001, 3), []int{7001, 7002, 7003}; !slices.Equal(got, want) {
		t.Errorf("SequentialPorts(7001, 3) = %v, want %v", got, want)
	}
	if got := NodeID(0); got != "n1" {
		t.Errorf("NodeID(0) = %s, want n1", got)
	}
}

func TestFreePortsAreDistinctAndBindable(t *testing.T) {
	ports, err := FreePorts(10)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("FreePorts returned %d twice: %v", p, ports)
		}
		seen[p] = true
		if err := checkPortFree(p, "test"); err != nil {
			t.Errorf("port %d from FreePorts: %v", p, err)
		}
	}
}

// A node's ports must not be ones the kernel hands out as ephemeral source
// ports: a chaos run restarts a SIGKILLed node on the same ports, and an
// outgoing connection that took one meanwhile made the restart fail with
// "address already in use" (CI, chaos/runner seed 2).
func TestFreePortsAvoidTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low-10000 < 1024 {
		t.Skipf("ephemeral range starts at %d: too little room below it, FreePorts falls back to kernel-picked ports", low)
	}
	ports, err := FreePorts(50)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p < 10000 || p >= low {
			t.Errorf("FreePorts gave %d, want one in [10000, %d) outside the ephemeral range", p, low)
		}
	}
}

// Two calls in one process never give the same port: concurrent tests
// (chaos/e2e's parallel tests) each get ports of their own. With 500
// ports each drawn from about 22,000, independent draws would share about
// eleven.
func TestFreePortsNotGivenTwice(t *testing.T) {
	if low := ephemeralLow(); low-10000 < 4096 {
		t.Skipf("ephemeral range starts at %d: too little room below it for 1,000 ports", low)
	}
	a, err := FreePorts(500)
	if err != nil {
		t.Fatal(err)
	}
	b, err := FreePorts(500)
	if err != nil {
		t.Fatal(err)
	}
	first := map[int]bool{}
	for _, p := range a {
		first[p] = true
	}
	for _, p := range b {
		if first[p] {
			t.Fatalf("FreePorts gave %d to two calls", p)
		}
	}
}

func TestCheckPortFreeNamesABusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	err = checkPortFree(port, "n1 http")
	if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), "(n1 http)") {
		t.Fatalf("checkPortFree(busy) = %v, want ErrPortInUse naming n1 http", err)
	}
}

func TestLoadOrCreateToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin-token")
	tok, created, err := LoadOrCreateToken(path)
	if err != nil || !created || len(tok) != 64 {
		t.Fatalf("first LoadOrCreateToken = %q, %v, %v; want a new 64-hex token", tok, created, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := st.Mode().Perm(); mode != 0o600 {
		t.Errorf("token file mode %v, want 0600", mode)
	}
	again, created, err := LoadOrCreateToken(path)
	if err != nil || created || again != tok {
		t.Errorf("second LoadOrCreateToken = %q, %v, %v; want the same token, not created", again, created, err)
	}
	if err := os.WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateToken(path); err == nil {
		t.Error("LoadOrCreateToken of an empty file succeeded, want an error")
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.Contains(string(b), "module github.com/baton-dev/baton") {
		t.Fatalf("ModuleRoot() = %s, whose go.mod is not baton's (%v)", root, err)
	}
}

func TestLayout(t *testing.T) {
	dir := t.TempDir()
	l := layout{Nodes: 3, HTTPPorts: []int{7001, 7002, 7003}, RaftPorts: []int{8001, 8005, 8002}}
	if got, want := l.String(), "3 nodes, HTTP ports 7001-7003, Raft ports 8001,8005,8002"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if err := writeLayout(dir, l); err != nil {
		t.Fatal(err)
	}
	newAt := func(cfg Config) *Cluster {
		cfg.Binary, cfg.BaseDir = "b", dir
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Without data the record does not bind.
	c := newAt(Config{Nodes: 5})
	if err := c.adoptLayout(); err != nil {
		t.Fatalf("adoptLayout without data = %v, want nil", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "n1", "data", "raft"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := newAt(Config{Nodes: 5}).adoptLayout(); !errors.Is(err, ErrLayout) {
		t.Errorf("adoptLayout with 5 nodes = %v, want ErrLayout", err)
	}
	if err := newAt(Config{HTTPPorts: []int{7001, 7002, 7004}}).adoptLayout(); !errors.Is(err, ErrLayout) {
		t.Errorf("adoptLayout with another port = %v, want ErrLayout", err)
	}
	c = newAt(Config{})
	if err := c.adoptLayout(); err != nil {
		t.Fatalf("adoptLayout without ports = %v, want nil", err)
	}
	if got, want := c.RaftAddr(1), "127.0.0.1:8005"; got != want {
		t.Errorf("adopted RaftAddr(1) = %s, want %s", got, want)
	}
}

func status(node int, state, leader string, applied uint64, digest string) observation {
	return observation{node: node, st: &NodeStatus{NodeID: NodeID(node), State: state, Leader: client.LeaderInfo{ID: leader}, AppliedIndex: applied, StateDigest: digest}}
}

func withCommit(o observation, commit uint64) observation {
	o.st.CommitIndex = commit
	return o
}

func TestAgreedLeader(t *testing.T) {
	tests := []struct {
		name string
		obs  []observation
		want int
		why  string
	}{
		{"agreed", []observation{status(0, "Follower", "n2", 0, ""), status(1, "Leader", "n2", 0, ""), status(2, "Follower", "n2", 0, "")}, 1, ""},
		{"one node", []observation{status(0, "Leader", "n1", 0, "")}, 0, ""},
		{"a follower without leader", []observation{status(0, "Leader", "n1", 0, ""), status(1, "Follower", "", 0, "")}, -1, "not all agree on n1"},
		{"two leaders", []observation{status(0, "Leader", "n1", 0, ""), status(1, "Leader", "n2", 0, "")}, -1, "two leaders"},
		{"no leader", []observation{status(0, "Candidate", "", 0, ""), status(1, "Follower", "", 0, "")}, -1, "no node is Leader"},
		{"unreachable node", []observation{status(0, "Leader", "n1", 0, ""), {node: 1, err: errors.New("refused")}}, -1, "n2: refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := agreedLeader(tt.obs)
			if got != tt.want || !strings.Contains(why, tt.why) {
				t.Errorf("agreedLeader = %d, %q; want %d, %q", got, why, tt.want, tt.why)
			}
		})
	}
}

func TestConverged(t *testing.T) {
	tests := []struct {
		name    string
		obs     []observation
		want    uint64
		why     string
		diverge bool
	}{
		{"same", []observation{status(0, "Leader", "n1", 9, "d"), status(1, "Follower", "n1", 9, "d")}, 9, "", false},
		{"equal but no leader yet (just restarted)", []observation{status(0, "Follower", "", 0, "e"), status(1, "Follower", "", 0, "e")}, 0, "not caught up", false},
		{"equal but behind the commit index", []observation{withCommit(status(0, "Leader", "n1", 5, "d"), 9), withCommit(status(1, "Follower", "n1", 5, "d"), 9)}, 0, "not caught up", false},
		{"lagging", []observation{status(0, "", "", 9, "d"), status(1, "", "", 7, "c")}, 0, "applied indexes differ", false},
		{"diverged", []observation{status(0, "", "", 9, "d"), status(1, "", "", 7, "c"), status(2, "", "", 9, "x")}, 0, "", true},
		{"unreachable", []observation{status(0, "", "", 9, "d"), {node: 1, err: errors.New("refused")}}, 0, "n2: refused", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why, err := converged(tt.obs)
			if got != tt.want || !strings.Contains(why, tt.why) || errors.Is(err, ErrDiverged) != tt.diverge {
				t.Errorf("converged = %d, %q, %v; want %d, %q, diverged %v", got, why, err, tt.want, tt.why, tt.diverge)
			}
		})
	}
}

func TestLineWriter(t *testing.T) {
	var out strings.Builder
	var mu sync.Mutex
	w := &lineWriter{mu: &mu, w: &out, prefix: "n1| "}
	_, _ = w.Write([]byte("hel"))
	_, _ = w.Write([]byte("lo\nwor"))
	_, _ = w.Write([]byte("ld\n\nlast"))
	w.Flush()
	if got, want := out.String(), "n1| hello\nn1| world\nn1| \nn1| last\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

func TestTailLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 5000 {
		b.WriteString(strings.Repeat("x", i%7) + "line\n")
	}
	b.WriteString("the end\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got := tailLines(path, 3)
	if want := "line\nxline\nthe end"; got != want {
		t.Errorf("tailLines = %q, want %q", got, want)
	}
	if got := tailLines(filepath.Join(t.TempDir(), "missing"), 3); !strings.Contains(got, "no such file") {
		t.Errorf("tailLines(missing) = %q, want the error", got)
	}
}
