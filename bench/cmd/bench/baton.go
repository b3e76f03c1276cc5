package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/baton-dev/baton/bench/baton"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// env starts a fresh Baton cluster for one workload, its nodes at
// GOMAXPROCS setting procs: result.ProcsDefault leaves it to their
// runtime (none inherited from the driver), result.ProcsPinned gives each
// its share of the cores (cmd/batond/cluster.MemberProcs).
func (s *suite) env(ctx context.Context, procs, name string, extra ...string) (*baton.Env, error) {
	dir := filepath.Join(s.work, "baton-"+procs+"-"+name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	rule := cluster.ProcsRuntime
	if procs == result.ProcsPinned {
		rule = cluster.ProcsShare
	}
	cfg := baton.EnvConfig{Binary: s.o.batond, BaseDir: dir, Procs: rule,
		ExtraArgs: append(append([]string(nil), s.o.batondArgs...), extra...)}
	if s.o.verbose {
		cfg.Output = os.Stderr
	}
	return baton.StartEnv(ctx, cfg)
}

func (s *suite) params() baton.Params {
	return baton.Params{Warmup: s.plan.warmup, Duration: s.plan.duration, Seed: s.o.seed}
}

// baton runs workload w on a fresh Baton cluster (one per variant for
// cas, so that no variant runs on the state the previous one left) at
// GOMAXPROCS setting procs.
func (s *suite) baton(ctx context.Context, w, procs string) ([]*result.Run, error) {
	p, pl := s.params(), s.plan
	var runs []*result.Run
	run := func(name string, f func(env *baton.Env) (*result.Run, error), extra ...string) error {
		env, err := s.env(ctx, procs, name, extra...)
		if err != nil {
			return err
		}
		defer env.Close()
		term := env.Term(ctx)
		r, err := f(env)
		if r != nil {
			env.CountElections(ctx, r, term)
			runs = append(runs, r)
		}
		return err
	}
	// runMany is run for the workloads that measure several runs on one
	// cluster (sdk: the Go SDK's and the Python SDK's).
	runMany := func(name string, f func(env *baton.Env) ([]*result.Run, error)) error {
		env, err := s.env(ctx, procs, name)
		if err != nil {
			return err
		}
		defer env.Close()
		term := env.Term(ctx)
		rs, err := f(env)
		for _, r := range rs { // the runs shared the cluster: each shows them all
			env.CountElections(ctx, r, term)
		}
		runs = append(runs, rs...)
		return err
	}
	switch w {
	case result.WorkloadSDK:
		return runs, s.sdk(ctx, runMany)
	case result.WorkloadLangGraph:
		return runs, s.langgraphBaton(ctx, runMany)
	case "cas":
		for _, n := range pl.casClients {
			logf("  baton cas C=%d", n)
			if err := run(fmt.Sprintf("cas-%d", n), func(env *baton.Env) (*result.Run, error) {
				return baton.CAS(ctx, env, p, n)
			}); err != nil {
				return runs, err
			}
		}
	case "queue":
		for _, n := range pl.queueWorkers {
			logf("  baton queue W=%d (preload %d)", n, pl.queuePreload)
			if err := run(fmt.Sprintf("queue-%d", n), func(env *baton.Env) (*result.Run, error) {
				return baton.Queue(ctx, env, p, baton.QueueParams{Workers: n, Preload: pl.queuePreload})
			}); err != nil {
				return runs, err
			}
		}
	case "handoff":
		return runs, run(w, func(env *baton.Env) (*result.Run, error) { return baton.Handoff(ctx, env, p, pl.handoff) })
	case "recovery":
		return runs, run(w, func(env *baton.Env) (*result.Run, error) {
			return baton.Recovery(ctx, env, p, baton.RecoveryParams{Clients: pl.recoveryClients, Schedule: pl.kills})
		})
	case "scale":
		sp := baton.Params{Warmup: pl.scaleWarmup, Duration: pl.scaleDuration, Seed: s.o.seed}
		return runs, run(w, func(env *baton.Env) (*result.Run, error) { return baton.Scale(ctx, env, sp, pl.scale) },
			baton.ScaleArgs...)
	case result.WorkloadArtifacts:
		logf("  baton artifacts: %s", baton.HumanBytes(pl.artifactSize))
		return runs, run(w, func(env *baton.Env) (*result.Run, error) {
			dir := filepath.Join(s.work, "artifacts-content")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			return baton.Artifacts(ctx, env, baton.ArtifactParams{Size: pl.artifactSize, Seed: s.o.seed, Dir: dir,
				Logf: func(format string, args ...any) { logf("    "+format, args...) }})
		})
	case "soak":
		logf("  baton soak: cas C=%d for %v, memory every %v", pl.soak.Clients, pl.soakWarmup+pl.soakDuration, pl.soak.SampleEvery)
		sp := baton.Params{Warmup: pl.soakWarmup, Duration: pl.soakDuration, Seed: s.o.seed}
		return runs, run(w, func(env *baton.Env) (*result.Run, error) { return baton.Soak(ctx, env, sp, pl.soak) })
	}
	return runs, nil
}

// profile runs cas or queue (--pprof-workload) at --pprof-clients once more (at
// default GOMAXPROCS) on a cluster whose nodes serve pprof,
// makes the node that got the pprof port the leader (or, with
// --pprof-role=follower, another node the leader), and saves a CPU
// profile of it over the measured window, with the CPU time every process
// used meanwhile.
func (s *suite) profile(ctx context.Context) error {
	ports, err := cluster.FreePorts(1)
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	// Every node is given the same address: the first to bind it serves
	// the profiler, the others log the failure and go on.
	env, err := s.env(ctx, result.ProcsDefault, "profile", "--pprof-addr="+addr)
	if err != nil {
		return err
	}
	defer env.Close()
	id, err := pprofNode(env, addr)
	if err != nil {
		return err
	}
	leader := id
	if s.o.pprofRole == "follower" {
		for i := range env.Cluster.Size() {
			if other := env.Cluster.ID(i); other != id {
				leader = other
				break
			}
		}
	}
	if err := makeLeader(ctx, env, leader); err != nil {
		return err
	}
	if err := os.MkdirAll(s.o.pprofDir, 0o755); err != nil {
		return err
	}
	// The CPU profile covers the window but its last 5 s, which an
	// execution trace of 3 s covers (for off-CPU waits: syscalls, locks,
	// scheduling).
	secs := max(int(s.plan.duration.Seconds())-5, 2)
	n := s.o.pprofClients
	name := "baton-" + s.o.pprofWorkload + strconv.Itoa(n) + "-" + s.o.pprofRole
	prof := filepath.Join(s.o.pprofDir, name+"-cpu.pprof")
	lgProf := filepath.Join(s.o.pprofDir, name+"-loadgen-cpu.pprof")
	trace := filepath.Join(s.o.pprofDir, name+".trace")
	var cpu string
	p := s.params()
	p.During = func(ctx context.Context) {
		before := cpuTimes(env)
		t0 := time.Now()
		// The load generator (this process, the Go SDK's side) is
		// profiled over the same window as the node.
		stop := profileSelf(lgProf)
		if err := fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), prof); err != nil {
			logf("  profile: %v", err)
		}
		stop()
		cpu = cpuReport(before, cpuTimes(env), time.Since(t0))
		if err := fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/trace?seconds=3", addr), trace); err != nil {
			logf("  trace: %v", err)
		}
	}
	var r *result.Run
	if s.o.pprofWorkload == "queue" {
		r, err = baton.Queue(ctx, env, p, baton.QueueParams{Workers: n, Preload: s.plan.queuePreload})
	} else {
		r, err = baton.CAS(ctx, env, p, n)
	}
	if err != nil {
		return err
	}
	logf("  profiled run: %s", summary(r))
	top, _ := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=45", prof).CombinedOutput()
	cum, _ := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=45", prof).CombinedOutput()
	lgCum, _ := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=45", lgProf).CombinedOutput()
	text := fmt.Sprintf("%s at %d, profiled run: %s\nprofiled node: %s (%s; leader %s)\n\nCPU used during the profile (cores busy on average):\n%s\n== flat ==\n%s\n== cumulative ==\n%s\n== load generator, cumulative ==\n%s",
		s.o.pprofWorkload, n, summary(r), id, s.o.pprofRole, leader, cpu, top, cum, lgCum)
	for _, kind := range []string{"syscall", "sync", "sched", "net"} {
		out, err := traceProfile(ctx, trace, kind, filepath.Join(s.o.pprofDir, name+"-"+kind+".pprof"))
		if err != nil {
			out = err.Error()
		}
		text += fmt.Sprintf("\n== execution trace, %s blocking (wall time, 3 s) ==\n%s", kind, out)
	}
	return os.WriteFile(filepath.Join(s.o.pprofDir, name+"-top.txt"), []byte(text), 0o644)
}

// profileSelf starts a CPU profile of this process into path and returns
// the function that stops it; a failure is logged and profiles nothing.
func profileSelf(path string) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		logf("  load generator profile: %v", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		logf("  load generator profile: %v", err)
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			logf("  load generator profile: %v", err)
		}
	}
}

// pprofNode returns the id of the node whose process listens on addr's
// port: the socket inode listed for the port in /proc/net/tcp is among
// that process's file descriptors.
func pprofNode(env *baton.Env, addr string) (string, error) {
	_, portText, _ := strings.Cut(addr, ":")
	port, _ := strconv.Atoi(portText)
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return "", err
	}
	inode := ""
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		// local_address is HEXIP:HEXPORT; state 0A is LISTEN.
		if len(f) > 9 && f[3] == "0A" && strings.HasSuffix(f[1], fmt.Sprintf(":%04X", port)) {
			inode = f[9]
		}
	}
	if inode == "" {
		return "", fmt.Errorf("nobody listens on %s", addr)
	}
	c := env.Cluster
	for i := range c.Size() {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", c.PID(i)))
		for _, fd := range fds {
			if target, _ := os.Readlink(fd); target == "socket:["+inode+"]" {
				return c.ID(i), nil
			}
		}
	}
	return "", fmt.Errorf("no node holds the socket listening on %s", addr)
}

// makeLeader transfers leadership to node id and waits for it.
func makeLeader(ctx context.Context, env *baton.Env, id string) error {
	c := env.Cluster
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		leader, err := c.WaitLeader(wctx)
		cancel()
		if err != nil {
			return err
		}
		if c.ID(leader) == id {
			return nil
		}
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = env.Admin.TransferLeadership(tctx, id)
		cancel()
		if err != nil {
			logf("  leadership transfer to %s: %v", id, err)
		}
		// Pacing between attempts, not a wait for a condition: the next
		// round asks the cluster (WaitLeader polls with its own deadline)
		// who leads, and a failed transfer (an election under way) is
		// retried no faster than twice a second, within the 30 s above.
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("could not make %s the leader", id)
}

func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cpuTimes returns the user+system CPU time of every node and of this
// process, by name.
func cpuTimes(env *baton.Env) map[string]time.Duration {
	out := map[string]time.Duration{"load generator (this process)": procCPU(os.Getpid())}
	c := env.Cluster
	for i := range c.Size() {
		if pid := c.PID(i); pid != 0 {
			out["batond "+c.ID(i)] = procCPU(pid)
		}
	}
	return out
}

// procCPU reads utime+stime of pid from /proc/PID/stat (clock ticks of
// 10 ms on Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func cpuReport(before, after map[string]time.Duration, over time.Duration) string {
	var b strings.Builder
	for _, name := range sortedKeys(after) {
		used := after[name] - before[name]
		fmt.Fprintf(&b, "  %-32s %.2f\n", name, used.Seconds()/over.Seconds())
	}
	return b.String()
}

func sortedKeys(m map[string]time.Duration) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// traceProfile extracts a blocking profile of one kind from an execution
// trace and returns its top entries by cumulative time.
func traceProfile(ctx context.Context, trace, kind, out string) (string, error) {
	data, err := exec.CommandContext(ctx, "go", "tool", "trace", "-pprof="+kind, trace).Output()
	if err != nil {
		return "", fmt.Errorf("go tool trace -pprof=%s: %w", kind, err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return "", err
	}
	top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=30", out).CombinedOutput()
	return string(top), err
}
