// Package runner runs chaos runs: start a cluster of real batond processes
// with failpoints and fast Raft timings, run the workload for a few seconds
// while the fault schedule of the run's seed is injected, heal everything,
// require a final write to succeed, read everything back, wait for the
// nodes to converge and run every checker on the recorded history.
//
// A run that finds an anomaly keeps its directory: the seed and the command
// that replays it (REPLAY), the history (history.json), the checkers'
// report (report.txt), porcupine's visualisation of every partition that
// is not linearizable (porcupine-*.html) and the node logs
// (cluster/n*/batond.log). A run that passes deletes its directory unless
// Config.Keep is set.
//
// # Contracts
//
//   - Run never panics on a product failure and never returns early on
//     one: whatever went wrong is an anomaly (a checker's, a crash, a
//     failed final write, a 5xx answer) or, for the harness itself, Err.
//   - Everything a run starts, it stops before returning.
//   - A replay with the same seed injects the same faults at the same
//     offsets and drives the agents with the same random choices; the
//     interleaving with the cluster's timing differs, as in every chaos
//     suite, so a replay reproduces the conditions, not the exact history.
package runner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/chaos/checker"
	"github.com/baton-dev/baton/chaos/faults"
	"github.com/baton-dev/baton/chaos/history"
	"github.com/baton-dev/baton/chaos/netns"
	"github.com/baton-dev/baton/chaos/workload"
	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// Config describes one run, or a series of runs (see Series).
type Config struct {
	// Binary is the batond executable for managed clusters.
	Binary string
	// Nodes is the cluster size: 3 (default) or 5.
	Nodes int
	// Seed decides the faults and the agents' random choices.
	Seed int64
	// Traffic is how long the agents run (default 8s).
	Traffic time.Duration
	// FaultsPerRun is the number of faults planned per run (default 3;
	// fewer when they do not fit in the traffic).
	FaultsPerRun int
	// Kinds are the fault kinds to draw from (default: all).
	Kinds []faults.Kind
	// OutDir receives one directory per run (run-<seed>); failing runs keep
	// theirs. Default: a new directory under the system's temp dir.
	OutDir string
	// Keep keeps the directories of passing runs too.
	Keep bool
	// Endpoints and AdminToken select external mode: the workload and the
	// checkers run against an existing cluster (such as `make run`'s),
	// with no process or network faults.
	Endpoints  []string
	AdminToken string
	// Transport, when set, carries the agents' requests: the bite tests put
	// a deliberately broken middlebox here.
	Transport http.RoundTripper
	// TLS runs the cluster with TLS everywhere (the API over https, Raft
	// and node-to-node calls over mutual TLS), as `batond local` does; the
	// agents and checkers trust its CA. Not with Transport (a middlebox
	// speaks plain HTTP).
	TLS bool
	// Netns, when set, runs the nodes in its network namespaces, makes the
	// partitions in the network and allows the kinds of faults.NetOnly.
	// The process must run in its network namespace (netns.Net.Command).
	Netns *netns.Net
	// Workload overrides the workload's defaults (agent counts, lease).
	Workload workload.Config
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
	// CheckTimeout bounds porcupine per partition (default 60s).
	CheckTimeout time.Duration

	// nemesis, when set (by tests), replaces the seeded fault schedule: it
	// runs during the traffic and must return before it ends.
	nemesis func(ctx context.Context, c *cluster.Cluster, rec *history.Recorder)
}

func (c Config) withDefaults() Config {
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Traffic == 0 {
		c.Traffic = 8 * time.Second
	}
	if c.FaultsPerRun == 0 {
		c.FaultsPerRun = 3
	}
	if len(c.Kinds) == 0 {
		c.Kinds = faults.Kinds
		if c.Netns != nil {
			c.Kinds = faults.NetKinds
		}
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

func (c Config) external() bool { return len(c.Endpoints) > 0 }

// ReplayCommand is the command line that replays the run of seed.
func (c Config) ReplayCommand(seed int64) string {
	c = c.withDefaults()
	var kinds []string
	for _, k := range c.Kinds {
		kinds = append(kinds, string(k))
	}
	cmd := fmt.Sprintf("go run ./chaos/cmd/chaos --runs 1 --seed %d --traffic %v", seed, c.Traffic)
	if c.external() {
		return cmd + " --endpoints " + strings.Join(c.Endpoints, ",") + " --token-file <admin token file>"
	}
	if c.Netns != nil {
		cmd += " --netns"
	}
	return cmd + fmt.Sprintf(" --nodes %d --faults-per-run %d --kinds %s", c.Nodes, c.FaultsPerRun, strings.Join(kinds, ","))
}

// Result is the outcome of one run.
type Result struct {
	Seed      int64
	Dir       string // kept when the run failed (or Keep)
	Command   string // replays it
	Faults    []history.Fault
	Ops       OpCounts
	Anomalies []checker.Anomaly
	// Inconclusive partitions (porcupine timed out); not anomalies.
	Inconclusive []string
	// Err is a failure of the harness itself (the cluster did not start,
	// setup failed): the run checked nothing.
	Err      error
	Duration time.Duration
	History  *history.History
	// LostResponses counts the writes whose answer the agents' lossy
	// transport threw away after they were applied.
	LostResponses int64
	// LeaseSkew is how far claims' lease ends strayed from the client's
	// clock plus the lease, inside and outside clock-skew faults.
	LeaseSkew LeaseSkew
	// Life counts what the lifecycle checker could judge, Coord what the
	// coordination checkers could.
	Life   checker.LifeCounts
	Coord  checker.CoordCounts
	report *checker.Report
}

// Failed reports whether the run found an anomaly or could not run.
func (r *Result) Failed() bool { return r.Err != nil || len(r.Anomalies) > 0 }

// OpCounts counts operations by outcome.
type OpCounts struct{ Total, OK, Fail, Unknown, Fenced int }

// Anomaly names for what the runner itself finds.
const (
	AnomalyCrash        = "crash"
	AnomalyAvailability = "availability"
	AnomalyServerError  = "server-error"
	// AnomalyFault: a fault could not be injected or healed; a run whose
	// faults did not happen as planned does not pass.
	AnomalyFault = "fault"
)

// Run performs one run.
func Run(ctx context.Context, cfg Config) *Result {
	cfg = cfg.withDefaults()
	start := time.Now()
	r := &Result{Seed: cfg.Seed, Command: cfg.ReplayCommand(cfg.Seed)}
	dir, err := runDir(cfg)
	if err != nil {
		r.Err = err
		return r
	}
	r.Dir = dir
	var env *environment
	if cfg.external() {
		env, err = externalEnv(cfg)
	} else {
		env, err = startCluster(ctx, cfg, dir)
	}
	if err != nil {
		r.Err = err
		r.save(cfg)
		return r
	}
	defer env.close() // also on a panic; close is idempotent
	r.run(ctx, cfg, env)
	env.close() // before save: a running node would write into the directory save removes
	r.Duration = time.Since(start)
	r.save(cfg)
	return r
}

func runDir(cfg Config) (string, error) {
	base := cfg.OutDir
	if base == "" {
		var err error
		if base, err = os.MkdirTemp("", "baton-chaos-"); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(base, fmt.Sprintf("run-%d", cfg.Seed))
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// environment is the cluster a run talks to.
type environment struct {
	c         *cluster.Cluster // nil in external mode
	endpoints []string
	token     string
	admin     *client.Client
	transport *http.Transport // the admin client's
	tls       *tls.Config     // the clients' configuration for https (nil: plain HTTP)
}

func (e *environment) close() {
	if e.c != nil {
		e.c.Close()
	}
	if e.transport != nil {
		e.transport.CloseIdleConnections()
	}
}

// newAdmin makes the admin client of env.
func (e *environment) newAdmin() error {
	e.transport = http.DefaultTransport.(*http.Transport).Clone()
	if e.tls != nil {
		e.transport.TLSClientConfig = e.tls.Clone()
	}
	var err error
	e.admin, err = client.New(client.Config{Endpoints: e.endpoints, Token: e.token, HTTPClient: &http.Client{Transport: e.transport},
		Timeout: 2 * time.Second, MaxRetry: 20 * time.Second})
	return err
}

// extraArgs are the batond flags of chaos clusters: failpoints, and
// snapshots small and frequent enough that restarts and rejoins go
// through snapshot installs.
var extraArgs = []string{"--failpoints", "--snapshot-threshold=400", "--snapshot-interval=1s", "--trailing-logs=200"}

func startCluster(ctx context.Context, cfg Config, dir string) (*environment, error) {
	if cfg.TLS && cfg.Transport != nil {
		return nil, fmt.Errorf("runner: TLS and a Transport (a plain-HTTP middlebox) do not go together")
	}
	ccfg := cluster.Config{Binary: cfg.Binary, Nodes: cfg.Nodes, BaseDir: filepath.Join(dir, "cluster"),
		Fast: true, ExtraArgs: extraArgs, TLS: cfg.TLS}
	if n := cfg.Netns; n != nil {
		if n.Nodes() != cfg.Nodes {
			return nil, fmt.Errorf("runner: %d nodes in a network of %d", cfg.Nodes, n.Nodes())
		}
		// Each node has a namespace of its own, where these ports are free.
		ccfg.Hosts, ccfg.Launch = n.Hosts(), n.Launch
		ccfg.HTTPPorts, ccfg.RaftPorts = cluster.SequentialPorts(7001, cfg.Nodes), cluster.SequentialPorts(8001, cfg.Nodes)
		if err := n.Heal(ctx); err != nil { // what a previous run may have left
			return nil, err
		}
	}
	c, err := cluster.New(ccfg)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.Start(sctx); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := c.WaitLeader(sctx); err != nil {
		c.Close()
		return nil, err
	}
	env := &environment{c: c, endpoints: c.Endpoints(), token: c.AdminToken()}
	if cfg.TLS {
		env.tls = c.ClientTLS()
	}
	if err := env.newAdmin(); err != nil {
		c.Close()
		return nil, err
	}
	return env, nil
}

func externalEnv(cfg Config) (*environment, error) {
	env := &environment{endpoints: cfg.Endpoints, token: cfg.AdminToken}
	return env, env.newAdmin()
}

func (r *Result) run(ctx context.Context, cfg Config, env *environment) {
	rec := history.NewRecorder() // Setup records nothing; times count from here
	w, err := setupWorkload(ctx, cfg, env, rec)
	if err != nil {
		r.Err = err
		return
	}
	defer w.Close()
	traffic(ctx, cfg, env, w, rec)
	r.LostResponses = w.LostResponses()
	heal(ctx, cfg, env)
	extra := finish(w)
	if err := w.Final(); err != nil {
		r.Err = err
	}
	h := rec.History(cfg.Seed)
	h.Nodes = converge(ctx, env)
	extra = append(extra, crashes(env)...)
	extra = append(extra, serverErrors(h)...)
	extra = append(extra, faultErrors(h)...)
	report := checker.Check(h, checker.Options{LinearizableTimeout: cfg.CheckTimeout})
	r.History, r.Faults, r.report = h, h.Faults, report
	r.Ops, r.LeaseSkew, r.Life = countOps(h), leaseSkew(h), checker.LifecycleCounts(h)
	r.Coord = checker.CoordinationCounts(h)
	r.Anomalies = append(report.Anomalies, extra...)
	r.Inconclusive = report.Inconclusive
}

// setupWorkload creates the run's tenant, principal and tasks.
func setupWorkload(ctx context.Context, cfg Config, env *environment, rec *history.Recorder) (*workload.Workload, error) {
	wcfg := cfg.Workload
	wcfg.Endpoints, wcfg.AdminToken, wcfg.Seed, wcfg.Transport = env.endpoints, env.token, cfg.Seed, cfg.Transport
	wcfg.TLS = env.tls
	wcfg.Tenant = fmt.Sprintf("chaos-%d-%d", cfg.Seed, time.Now().UnixNano()%1e9)
	w := workload.New(wcfg, rec)
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := w.Setup(sctx); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// traffic runs the agents for cfg.Traffic while the faults of the seed (or
// the test's nemesis) are injected, and returns once all have stopped.
func traffic(ctx context.Context, cfg Config, env *environment, w *workload.Workload, rec *history.Recorder) {
	var plan []faults.Fault
	if env.c != nil {
		plan = faults.Schedule(faults.Plan{Seed: cfg.Seed, Traffic: cfg.Traffic, PerRun: cfg.FaultsPerRun, Kinds: cfg.Kinds})
	}
	cfg.Logf("seed %d: %d nodes, %v of traffic, faults: %v", cfg.Seed, cfg.Nodes, cfg.Traffic, plan)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(stop) })
	begin := time.Now()
	switch {
	case cfg.nemesis != nil:
		wg.Go(func() { cfg.nemesis(ctx, env.c, rec) })
	case len(plan) > 0:
		injector := &faults.Injector{C: env.c, Admin: env.admin, Network: cfg.Netns}
		wg.Go(func() { runFaults(ctx, cfg, injector, plan, rec, begin) })
	}
	sleepCtx(ctx, cfg.Traffic)
	close(stop)
	wg.Wait()
}

// finish makes the final write, which a healed cluster must take.
func finish(w *workload.Workload) []checker.Anomaly {
	final, err := w.FinalWrite()
	if err == nil && final.Outcome == history.OK {
		return nil
	}
	return []checker.Anomaly{{Checker: AnomalyAvailability,
		Message: fmt.Sprintf("the final write after healing did not succeed: %s %s %v", final.Outcome, final.Err, err), Ops: []int{final.ID}}}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// runFaults injects the plan in order, each at its offset (or as soon as
// the previous one is healed), holding and healing each.
func runFaults(ctx context.Context, cfg Config, in *faults.Injector, plan []faults.Fault, rec *history.Recorder, begin time.Time) {
	for _, f := range plan {
		if wait := time.Until(begin.Add(f.At)); wait > 0 {
			sleepCtx(ctx, wait)
		}
		if time.Since(begin)+f.Hold > cfg.Traffic {
			return // no time left to hold and heal it during traffic
		}
		hf := history.Fault{Kind: string(f.Kind), Start: rec.Now(), ClockSkewMS: abs(f.Skew.Milliseconds())}
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		desc, heal, err := in.Inject(ictx, f)
		cancel()
		hf.Description = desc
		if err != nil {
			hf.Err = "inject: " + err.Error()
			hf.End = rec.Now()
			rec.Fault(hf)
			cfg.Logf("seed %d: fault %s: %v", cfg.Seed, f.Kind, err)
			continue
		}
		cfg.Logf("seed %d: fault %s", cfg.Seed, desc)
		sleepCtx(ctx, f.Hold)
		hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		note, err := heal(hctx)
		hf.Description += note
		if err != nil {
			hf.Err = "heal: " + err.Error()
			cfg.Logf("seed %d: heal %s: %v", cfg.Seed, f.Kind, err)
		}
		hf.End = rec.Now()
		rec.Fault(hf)
		// Let the cluster settle before the next fault, so faults never
		// pile up into a loss of quorum.
		_, _ = in.C.WaitLeader(hctx)
		cancel()
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// heal brings every node back: continue paused ones, restart stopped ones,
// clear every failpoint, and wait for a leader.
func heal(ctx context.Context, cfg Config, env *environment) {
	if env.c == nil {
		return
	}
	c := env.c
	hctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for i := range c.Size() {
		switch {
		case c.Running(i) && !c.Live(i):
			_ = c.Resume(i)
		case !c.Running(i) && wiped(c, i):
			in := &faults.Injector{C: c, Admin: env.admin}
			if err := in.Rejoin(hctx, i); err != nil {
				cfg.Logf("seed %d: rejoin %s after the run: %v", cfg.Seed, c.ID(i), err)
			}
		case !c.Running(i):
			if err := c.Restart(hctx, i); err != nil {
				cfg.Logf("seed %d: restart %s after the run: %v", cfg.Seed, c.ID(i), err)
			}
		}
	}
	if cfg.Netns != nil {
		if err := cfg.Netns.Heal(hctx); err != nil {
			cfg.Logf("seed %d: heal the network: %v", cfg.Seed, err)
		}
	}
	if err := (faults.Net{C: c}).Heal(hctx); err != nil {
		cfg.Logf("seed %d: heal: %v", cfg.Seed, err)
	}
	_, _ = c.WaitLeader(hctx)
}

// wiped reports whether node i has no data directory: a wiped node, which
// must join again rather than restart (it would have forgotten its votes).
func wiped(c *cluster.Cluster, i int) bool {
	_, err := os.Stat(c.DataDir(i))
	return errors.Is(err, fs.ErrNotExist)
}

// converge waits until the nodes agree, then records each node's state.
func converge(ctx context.Context, env *environment) []history.NodeState {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if env.c != nil {
		// Whether it converges or not, record what each node says: the
		// convergence checker judges it. The nodes are asked one after
		// the other, and the leader may still commit meanwhile (a
		// retention purge falls due after the workload stopped), so the
		// reading is taken again until one finds them agreeing.
		return untilAgreed(cctx, env.c.Size(), func(i int) (string, *client.ClusterStatus, error) {
			if i == 0 {
				_, _ = env.c.WaitConverged(cctx)
			}
			st, err := env.c.Status(cctx, i)
			return env.c.ID(i), st, err
		})
	}
	return untilAgreed(cctx, len(env.endpoints), func(i int) (string, *client.ClusterStatus, error) {
		st, err := env.admin.ClusterAt(cctx, env.endpoints[i])
		return env.endpoints[i], st, err
	})
}

// untilAgreed reads the n nodes' states (status of node i: its name, for
// an error, and its status) until one reading finds them agreeing, or ctx
// ends; it returns the last reading.
func untilAgreed(ctx context.Context, n int, status func(i int) (string, *client.ClusterStatus, error)) []history.NodeState {
	for {
		var out []history.NodeState
		for i := range n {
			name, st, err := status(i)
			if err != nil {
				out = append(out, history.NodeState{ID: name, Err: err.Error()})
				continue
			}
			out = append(out, history.NodeState{ID: st.NodeID, AppliedIndex: st.AppliedIndex, StateDigest: st.StateDigest})
		}
		if len(checker.Converged(out)) == 0 {
			return out
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func crashes(env *environment) []checker.Anomaly {
	if env.c == nil {
		return nil
	}
	var out []checker.Anomaly
	for {
		select {
		case e := <-env.c.Exits():
			out = append(out, checker.Anomaly{Checker: AnomalyCrash, Key: e.ID, Message: e.String()})
		default:
			return out
		}
	}
}

func serverErrors(h *history.History) []checker.Anomaly {
	var out []checker.Anomaly
	for _, op := range h.Ops {
		if op.Code == workload.CodeServerError {
			out = append(out, checker.Anomaly{Checker: AnomalyServerError, Key: string(op.Kind) + " " + op.In.Key,
				Message: op.Err, Ops: []int{op.ID}})
		}
	}
	return out
}

func faultErrors(h *history.History) []checker.Anomaly {
	var out []checker.Anomaly
	for _, f := range h.Faults {
		if f.Err != "" {
			out = append(out, checker.Anomaly{Checker: AnomalyFault, Key: f.Kind, Message: f.Description + ": " + f.Err})
		}
	}
	return out
}

func countOps(h *history.History) OpCounts {
	var c OpCounts
	for _, op := range h.Ops {
		c.Total++
		switch op.Outcome {
		case history.OK:
			c.OK++
		case history.Fail:
			c.Fail++
			if op.Code == "fenced" {
				c.Fenced++
			}
		default:
			c.Unknown++
		}
	}
	return c
}
