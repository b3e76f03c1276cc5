package netns_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/chaos/faults"
	"github.com/baton-dev/baton/chaos/netns"
	"github.com/baton-dev/baton/chaos/runner"
	"github.com/baton-dev/baton/cmd/batond/cluster"
	"go.uber.org/goleak"
)

// batondEnv and batonEnv hand the binaries built by the parent to the
// re-executed test.
const (
	batondEnv = "BATON_NETNS_TEST_BATOND"
	batonEnv  = "BATON_NETNS_TEST_BATON"
)

var (
	batond, baton string
	batondErr     error
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "chaos-netns-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	switch {
	case os.Getenv(batondEnv) != "":
		batond, baton = os.Getenv(batondEnv), os.Getenv(batonEnv)
	case !testing.Short():
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		batond, batondErr = cluster.BuildBatond(ctx, dir)
		if batondErr == nil {
			baton, batondErr = buildCLI(ctx, dir)
		}
		cancel()
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// TestNetns runs a cluster whose members are in network namespaces of
// their own, joined by a bridge, and injects faults in the network: first
// a partition that must depose the leader, then the short chaos schedule
// of the network's fault kinds (partitions, one-way loss, delay, a
// flapping link), whose checkers must find no anomaly.
//
// The test makes the namespaces, then runs itself again inside the
// network namespace (where the members can be reached), as the child that
// does the work; where namespaces cannot be made it is skipped with a
// banner.
func TestNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no real batond processes")
	}
	if batondErr != nil {
		t.Fatalf("batond did not build: %v", batondErr)
	}
	n, err := netns.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if n != nil {
		t.Run("partition", func(t *testing.T) { partition(t, n) })
		t.Run("status", func(t *testing.T) { status(t, n) })
		t.Run("chaos", func(t *testing.T) { chaos(t, n) })
		return
	}
	n = setup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := n.Command(ctx, exe, "-test.run=^TestNetns$", "-test.v", "-test.count=1", "-test.timeout=7m")
	cmd.Env = append(cmd.Env, batondEnv+"="+batond, batonEnv+"="+baton)
	if err := stream(t, cmd); err != nil {
		t.Fatalf("the test inside the namespaces failed: %v", err)
	}
}

// setup makes a topology of n members, or skips the test with a banner
// when this machine cannot; the topology is removed when the test ends.
func setup(t *testing.T, nodes int) *netns.Net {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := netns.EnsureTools(ctx, t.Logf)
	if err == nil {
		err = netns.Check()
	}
	if err != nil {
		banner := "\n" + strings.Repeat("#", 72) + "\n" +
			"###  NETWORK NAMESPACE CHAOS TESTS SKIPPED: cannot make namespaces\n" +
			"###  " + err.Error() + "\n" +
			"###  (needs root, iproute2 and iptables; see chaos/README.md)\n" +
			strings.Repeat("#", 72) + "\n"
		fmt.Fprint(os.Stderr, banner)
		t.Skip(banner)
	}
	if swept, err := netns.Sweep(); err != nil {
		t.Logf("sweep: %v", err)
	} else if len(swept) > 0 {
		t.Logf("swept namespaces left by earlier runs: %v", swept)
	}
	n, err := netns.Setup(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("remove the namespaces: %v", err)
		}
		for _, name := range []string{n.NS(), n.Member(0)} {
			for _, dir := range []string{"/var/run/netns", "/etc/netns"} {
				if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s still there after Close", filepath.Join(dir, name))
				}
			}
		}
	})
	if !n.Netem() {
		t.Logf("no netem in this kernel: delays hold packets in an NFQUEUE")
	}
	return n
}

// stream runs cmd and logs its output line by line as it comes.
func stream(t *testing.T, cmd *exec.Cmd) error {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		t.Log("| " + sc.Text())
	}
	return cmd.Wait()
}

// partition cuts the leader from the other members in the network: they
// must elect another, and once healed all must agree again. Then each
// other fault of the network, with what it must do: a delayed member
// still answers, a follower the leader cannot reach loses its leader, a
// member whose link is down cannot be reached.
func partition(t *testing.T, n *netns.Net) {
	c, err := cluster.New(cluster.Config{Binary: batond, Nodes: n.Nodes(), BaseDir: t.TempDir(), Fast: true,
		Hosts: n.Hosts(), Launch: n.Launch,
		HTTPPorts: cluster.SequentialPorts(7001, n.Nodes()), RaftPorts: cluster.SequentialPorts(8001, n.Nodes())})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.URL(old); !strings.Contains(got, netns.Subnet) {
		t.Fatalf("node URL %s is not in the namespaces' range %s0/24", got, netns.Subnet)
	}
	if err := n.Isolate(ctx, old); err != nil {
		t.Fatal(err)
	}
	var rest []int
	for i := range n.Nodes() {
		if i != old {
			rest = append(rest, i)
		}
	}
	leader, err := c.WaitLeader(ctx, rest...)
	if err != nil {
		t.Fatalf("the members cut from leader %s elected none: %v", c.ID(old), err)
	}
	if leader == old {
		t.Fatalf("leader %s still leads the members cut from it", c.ID(old))
	}
	t.Logf("isolated %s in the network; %s was elected", c.ID(old), c.ID(leader))
	if err := n.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatalf("after healing: %v", err)
	}
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatalf("after healing: %v", err)
	}

	// A delay holds what one member sends: its heartbeats or answers go
	// through the delay, and healing lets everything held go.
	how, err := n.Delay(ctx, old, 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	before := n.Delayed()
	t0 := time.Now()
	if _, err := c.Status(ctx, old); err != nil {
		t.Fatalf("a delayed member does not answer: %v", err)
	}
	t.Logf("delay of %s by 150ms (%s): its status answered in %v", c.ID(old), how, time.Since(t0).Round(time.Millisecond))
	if how == "nfqueue" {
		for n.Delayed() == before {
			if ctx.Err() != nil {
				t.Fatalf("the NFQUEUE delay of %s let no packet go", c.ID(old))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := n.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatalf("after the delay: %v", err)
	}

	// A one-way loss of everything the leader sends to a follower: the
	// follower hears no heartbeat and loses its leader.
	leader, err = c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := (leader + 1) % n.Nodes()
	if err := n.Loss(ctx, leader, f, 100); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, c.ID(f)+" losing its leader", func() bool {
		st, err := c.Status(ctx, f)
		return err == nil && (st.Leader.ID == "" || st.State == cluster.StateCandidate)
	})
	if err := n.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatalf("after the loss: %v", err)
	}

	// A flapping link, down for the first half of its period: the member
	// cannot be reached; healing brings it back.
	if err := n.Flap(ctx, f, time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, c.ID(f)+" out of reach", func() bool {
		_, err := c.Status(ctx, f)
		return err != nil
	})
	if err := n.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatalf("after the flap: %v", err)
	}
}

// waitFor polls cond until it holds, failing the test when ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("%s: not before the deadline", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chaos is the short schedule of the network's fault kinds: three runs of
// three faults whose seeds (1, 2, 3) cover all seven kinds.
func chaos(t *testing.T, n *netns.Net) {
	cfg := runner.Config{Binary: batond, Nodes: n.Nodes(), Seed: 1, Traffic: 9 * time.Second, FaultsPerRun: 3,
		OutDir: t.TempDir(), Logf: t.Logf, TLS: true, Netns: n, Kinds: faults.NetKinds}
	if d := os.Getenv("CHAOS_OUT"); d != "" {
		cfg.OutDir = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := runner.Series(ctx, cfg, 3, func(r *runner.Result) {
		t.Logf("seed %d: %d faults, %d ops (ok %d, failed %d, unknown %d), %d anomalies, %v",
			r.Seed, len(r.Faults), r.Ops.Total, r.Ops.OK, r.Ops.Fail, r.Ops.Unknown, len(r.Anomalies), r.Duration.Round(time.Millisecond))
		if r.Err != nil {
			t.Errorf("seed %d: %v", r.Seed, r.Err)
		}
		for _, f := range r.Faults {
			t.Logf("  fault %s: %s", f.Kind, f.Description)
		}
	})
	var b strings.Builder
	s.Table(&b)
	t.Log("\n" + b.String())
	if s.TotalAnomalies() > 0 {
		for _, r := range s.FailedRuns {
			if b, err := os.ReadFile(filepath.Join(r.Dir, "report.txt")); err == nil {
				t.Logf("report of seed %d:\n%s", r.Seed, b)
			}
		}
		t.Fatalf("got %d anomalies, want 0 (set CHAOS_OUT=DIR to keep the artifacts)", s.TotalAnomalies())
	}
	if n := len(s.Faults); n != len(faults.NetKinds) {
		t.Logf("note: %d fault kinds were injected (%v), %d were planned", n, s.Faults, len(faults.NetKinds))
	}
	if s.Ops.Total < 300 {
		t.Errorf("got %d operations, want at least 300: the workload barely ran", s.Ops.Total)
	}
}

// buildCLI builds the baton CLI into dir.
func buildCLI(ctx context.Context, dir string) (string, error) {
	root, err := cluster.ModuleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "baton")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/baton")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/baton: %v\n%s", err, msg)
	}
	return out, nil
}

// status: members that advertise names only they resolve ("n1:7001", as
// in deploy/compose.yaml, where the host does not resolve the service
// names) are reported through the endpoints the CLI was given, and one
// that no endpoint reaches is reported with the reason.
func status(t *testing.T, n *netns.Net) {
	c, err := cluster.New(cluster.Config{Binary: batond, Nodes: n.Nodes(), BaseDir: t.TempDir(), Fast: true, TLS: true,
		Hosts: n.Hosts(), HTTPPorts: cluster.SequentialPorts(7001, n.Nodes()), RaftPorts: cluster.SequentialPorts(8001, n.Nodes()),
		Launch: func(i int, bin string, args []string) (string, []string) {
			return n.Launch(i, bin, append(args, fmt.Sprintf("--advertise-http-addr=%s:%d", cluster.NodeID(i), 7001+i)))
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Every member publishes its advertised address through the log.
	advertised := map[string]string{}
	for i := range n.Nodes() {
		advertised[c.ID(i)] = fmt.Sprintf("%s:%d", c.ID(i), 7001+i)
	}
	for {
		l, err := c.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Status(ctx, l)
		named := 0
		for _, m := range st.Members {
			if err == nil && m.HTTPAddr == advertised[m.ID] {
				named++
			}
		}
		if named == n.Nodes() {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("members never advertised their names: %+v %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	type view struct {
		Nodes []struct {
			ID      string `json:"id"`
			Answers bool   `json:"answers"`
			Error   string `json:"error"`
			Via     string `json:"via"`
		} `json:"nodes"`
	}
	run := func(endpoints ...string) (view, string) {
		t.Helper()
		var v view
		for _, format := range []string{"json", "table"} {
			cmd := exec.CommandContext(ctx, baton, "status", "-o", format)
			cmd.Env = append(os.Environ(), "BATON_ENDPOINTS="+strings.Join(endpoints, ","), "BATON_CACERT="+c.CAFile(),
				"BATON_TOKEN="+c.AdminToken())
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("baton status -o %s: %v\n%s", format, err, out)
			}
			if format == "table" {
				return v, string(out)
			}
			if err := json.Unmarshal(out, &v); err != nil || len(v.Nodes) != n.Nodes() {
				t.Fatalf("baton status -o json: %v\n%s", err, out)
			}
		}
		return v, ""
	}

	v, table := run(c.Endpoints()...)
	t.Logf("baton status, every node an endpoint:\n%s", table)
	for i, node := range v.Nodes {
		if !node.Answers || node.Via != c.URL(i) || node.ID != c.ID(i) {
			t.Errorf("baton status with every endpoint: got %+v, want %s answering via %s\n%s", node, c.ID(i), c.URL(i), table)
		}
	}
	for i := range n.Nodes() {
		row := fmt.Sprintf(`(?m)^%s\s+true\s+yes\s+\S+\s+[0-9]+\s+[0-9]+\s+[0-9]+\s+%s:%d \(via %s\)$`,
			c.ID(i), c.ID(i), 7001+i, regexp.QuoteMeta(c.URL(i)))
		if !regexp.MustCompile(row).MatchString(table) {
			t.Errorf("baton status: got\n%s\nwant a row matching %s", table, row)
		}
	}

	// One endpoint: the others are out of reach, and the error says why.
	v, table = run(c.URL(0))
	t.Logf("baton status -e %s:\n%s", c.URL(0), table)
	for i, node := range v.Nodes {
		switch {
		case i == 0 && (!node.Answers || node.Via != c.URL(0)):
			t.Errorf("baton status -e %s: got %+v, want it answering", c.URL(0), node)
		case i > 0 && (node.Answers || !strings.Contains(node.Error, "does not resolve here") || !strings.Contains(node.Error, "--endpoints")):
			t.Errorf("baton status -e %s: got %+v, want %s not answering, its advertised name unresolved and --endpoints suggested\n%s",
				c.URL(0), node, c.ID(i), table)
		}
	}
}
