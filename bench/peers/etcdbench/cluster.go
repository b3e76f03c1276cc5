// Package etcdbench runs the suite's cas, queue, recovery and soak workloads
// against a three-member etcd cluster on the loopback interface, expressed
// with etcd transactions and leases, measured by bench/loadgen like Baton.
package etcdbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/peers/proc"
	"github.com/baton-dev/baton/cmd/batond/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Cluster is a set of etcd members started by the benchmark.
type Cluster struct {
	bin     string
	dir     string
	env     []string // each member's whole environment
	members []*member
}

type member struct {
	name       string
	dataDir    string
	logPath    string
	clientPort int
	peerPort   int
	args       []string
	proc       *proc.Proc
}

// Options are the choices of StartWith.
type Options struct {
	// Extra are flags for every member.
	Extra []string
	// Procs is the members' GOMAXPROCS, by the rule Baton's members
	// follow (cmd/batond/cluster.Config.Procs): cluster.ProcsShare (the zero
	// value) gives each its share of the cores, MemberProcs(n), unless
	// this process's environment sets GOMAXPROCS; cluster.ProcsRuntime
	// leaves it to etcd's Go runtime and removes any GOMAXPROCS from the
	// environment the members inherit.
	Procs cluster.ProcsRule
}

// Start launches n members with etcd's default timings (heartbeat 100 ms,
// election 1 s) in dir, and returns once a leader serves writes.
func Start(ctx context.Context, bin, dir string, n int) (*Cluster, error) {
	return StartWith(ctx, bin, dir, n, Options{})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, bin, dir string, n int, o Options) (*Cluster, error) {
	env, err := memberEnv(os.Environ(), o.Procs, n)
	if err != nil {
		return nil, err
	}
	ports, err := proc.FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, env: env}
	var initial []string
	for i := range n {
		m := &member{name: "e" + strconv.Itoa(i+1), clientPort: ports[2*i], peerPort: ports[2*i+1]}
		m.dataDir = filepath.Join(dir, m.name)
		m.logPath = filepath.Join(dir, m.name+".log")
		c.members = append(c.members, m)
		initial = append(initial, fmt.Sprintf("%s=http://127.0.0.1:%d", m.name, m.peerPort))
	}
	for _, m := range c.members {
		cu := fmt.Sprintf("http://127.0.0.1:%d", m.clientPort)
		pu := fmt.Sprintf("http://127.0.0.1:%d", m.peerPort)
		m.args = []string{"--name", m.name, "--data-dir", m.dataDir,
			"--listen-client-urls", cu, "--advertise-client-urls", cu,
			"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "bench", "--logger", "zap", "--log-level", "warn"}
		m.args = append(m.args, o.Extra...)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		p, err := proc.Start(bin, m.args, c.env, m.logPath, nil)
		if err != nil {
			c.Close()
			return nil, err
		}
		m.proc = p
	}
	if err := c.waitWritable(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// memberEnv is the environment of each of n members, from this process's
// environment environ, by rule.
func memberEnv(environ []string, rule cluster.ProcsRule, n int) ([]string, error) {
	env := make([]string, 0, len(environ)+1)
	procsSet := false
	for _, kv := range environ {
		isProcs := strings.HasPrefix(kv, "GOMAXPROCS=")
		procsSet = procsSet || (isProcs && kv != "GOMAXPROCS=")
		if rule == cluster.ProcsRuntime && isProcs {
			continue
		}
		env = append(env, kv)
	}
	switch rule {
	case cluster.ProcsShare:
		if !procsSet {
			// The members share this machine as Baton's do: the same rule.
			env = append(env, "GOMAXPROCS="+strconv.Itoa(cluster.MemberProcs(n)))
		}
	case cluster.ProcsRuntime:
	default:
		return nil, fmt.Errorf("etcdbench: unknown GOMAXPROCS rule %v", rule)
	}
	return env, nil
}

// Endpoints are the members' client URLs, in member order.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = fmt.Sprintf("http://127.0.0.1:%d", m.clientPort)
	}
	return eps
}

// Client returns a client whose first endpoint is member i's (i modulo
// the size); etcd's client balances over all of them.
func (c *Cluster) Client(i int) (*clientv3.Client, error) {
	eps := c.Endpoints()
	k := i % len(eps)
	rotated := append(append([]string(nil), eps[k:]...), eps[:k]...)
	return clientv3.New(clientv3.Config{Endpoints: rotated, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// waitWritable waits until a put succeeds.
func (c *Cluster) waitWritable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cli, err := c.Client(0)
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		for _, m := range c.members {
			if m.proc.Exited() {
				return fmt.Errorf("etcd %s exited during start; see %s", m.name, m.logPath)
			}
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Put(pctx, "bench/ready", "1")
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd cluster not writable: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Leader returns the index of the member that leads, asking every live
// member.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	var last error
	for attempt := 0; attempt < 200; attempt++ {
		for i, m := range c.members {
			if m.proc.Exited() {
				continue
			}
			idx, err := c.leaderSeenBy(ctx, i)
			if err == nil && idx >= 0 {
				return idx, nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return -1, fmt.Errorf("no etcd leader found: %v", last)
}

func (c *Cluster) leaderSeenBy(ctx context.Context, i int) (int, error) {
	ep := c.Endpoints()[i]
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := cli.Status(sctx, ep)
	if err != nil {
		return -1, err
	}
	if st.Leader == 0 {
		return -1, errors.New(c.members[i].name + " knows no leader")
	}
	if st.Leader == st.Header.MemberId {
		return i, nil
	}
	ml, err := cli.MemberList(sctx)
	if err != nil {
		return -1, err
	}
	for _, mem := range ml.Members {
		if mem.ID == st.Leader {
			for j, m := range c.members {
				if m.name == mem.Name {
					return j, nil
				}
			}
		}
	}
	return -1, fmt.Errorf("leader %x not among the members", st.Leader)
}

// Name is member i's name.
func (c *Cluster) Name(i int) string { return c.members[i].name }

// Size is the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// PID is member i's process id, or 0 when it does not run.
func (c *Cluster) PID(i int) int {
	m := c.members[i]
	if m.proc == nil || m.proc.Exited() {
		return 0
	}
	return m.proc.Pid()
}

// Kill crashes member i with SIGKILL.
func (c *Cluster) Kill(i int) error { return c.members[i].proc.Kill() }

// Restart starts the killed member i again on its data.
func (c *Cluster) Restart(i int) error {
	m := c.members[i]
	if !m.proc.Exited() {
		return fmt.Errorf("etcd %s is running", m.name)
	}
	p, err := proc.Start(c.bin, m.args, c.env, m.logPath, nil)
	if err != nil {
		return err
	}
	m.proc = p
	return nil
}

// Close stops every member.
func (c *Cluster) Close() error {
	var errs []error
	for _, m := range c.members {
		if m.proc != nil {
			errs = append(errs, m.proc.Stop(10*time.Second))
		}
	}
	return errors.Join(errs...)
}
