// Command peerbench runs the benchmark suite's workloads against Baton's
// peers, etcd (cas, queue, recovery, soak) and PostgreSQL (queue), and
// writes the runs as a JSON array of result.Run for the driver
// (bench/cmd/bench) to merge into its report.
// It starts the peers itself: a three-member etcd cluster on 127.0.0.1, or
// one PostgreSQL server in a fresh data directory.
//
// It lives in a module of its own (bench/peers) so that the etcd and pgx
// clients never enter Baton's go.mod. Usage:
//
//	peerbench --system etcd --workloads cas,queue,recovery --work DIR --out etcd.json
//	peerbench --system etcd --workloads soak --warmup 5s --duration 29m55s --work DIR --out etcd.json
//	peerbench --system etcd --workloads cas --procs default --work DIR --out etcd.json
//	peerbench --system postgres --workloads queue --work DIR --out pg.json
//	peerbench --system postgres --workloads langgraph --python bin/py-bench/bin/python \
//	    --lg-script bench/python/lgbench.py --work DIR --out pg.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/baton-dev/baton/bench/loadgen"
	"github.com/baton-dev/baton/bench/peers/etcdbench"
	"github.com/baton-dev/baton/bench/peers/pgbench"
	"github.com/baton-dev/baton/bench/pyrun"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

type options struct {
	system, workloads, work, out string
	warmup, duration             time.Duration
	seed                         uint64
	casClients, queueWorkers     []int
	queuePreload                 int
	recoveryClients              int
	kills                        loadgen.KillSchedule
	soakClients                  int
	soakSample                   time.Duration
	etcdBin, pgBin               string
	// procs is the etcd members' GOMAXPROCS setting, result.ProcsPinned
	// or result.ProcsDefault.
	procs string
	// The langgraph workload: PostgreSQL's LangGraph saver driven by the
	// suite's Python driver (bench/python/lgbench.py).
	python, lgScript string
	lgThreads        []int
	lgSteps          int
	lgMessageBytes   int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("peerbench", flag.ContinueOnError)
	fs.StringVar(&o.system, "system", "", "etcd or postgres (required)")
	fs.StringVar(&o.workloads, "workloads", "cas,queue,recovery", "comma-separated workloads")
	fs.StringVar(&o.work, "work", "", "directory for the servers' data and logs (required)")
	fs.StringVar(&o.out, "out", "", "JSON file for the runs (required)")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "warm-up of each run")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "measured window of each run")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the workers' random choices")
	cas := fs.String("cas-clients", "1,64,256", "cas: client counts")
	qw := fs.String("queue-workers", "64", "queue: worker counts")
	fs.IntVar(&o.queuePreload, "queue-preload", 100000, "queue: tasks created before each run")
	fs.IntVar(&o.recoveryClients, "recovery-clients", 64, "recovery: cas clients")
	fs.DurationVar(&o.kills.First, "kill-first", 8*time.Second, "recovery: first leader kill, after the run's start")
	fs.DurationVar(&o.kills.Period, "kill-period", 10*time.Second, "recovery: time between kills")
	fs.DurationVar(&o.kills.Down, "kill-down", 2*time.Second, "recovery: how long a killed node stays down")
	fs.IntVar(&o.kills.Count, "kills", 5, "recovery: number of kills")
	fs.IntVar(&o.soakClients, "soak-clients", 64, "soak: cas clients (the run lasts --warmup plus --duration)")
	fs.DurationVar(&o.soakSample, "soak-sample", 10*time.Second, "soak: interval between memory samples")
	fs.StringVar(&o.etcdBin, "etcd-bin", "etcd", "etcd binary")
	fs.StringVar(&o.procs, "procs", result.ProcsPinned, "etcd members' GOMAXPROCS: pinned (cores / members, as Baton's cmd/batond/cluster.MemberProcs, unless GOMAXPROCS is set) or default (left to etcd's Go runtime; GOMAXPROCS removed from their environment)")
	fs.StringVar(&o.pgBin, "pg-bin", "", "PostgreSQL bin directory (default: newest /usr/lib/postgresql/*/bin)")
	fs.StringVar(&o.python, "python", "", "langgraph: the Python of the bench venv (bin/py-bench/bin/python)")
	fs.StringVar(&o.lgScript, "lg-script", "", "langgraph: bench/python/lgbench.py")
	lgThreads := fs.String("lg-threads", "1,32", "langgraph: concurrent LangGraph threads")
	fs.IntVar(&o.lgSteps, "lg-steps", 20, "langgraph: steps of each thread before a new one")
	fs.IntVar(&o.lgMessageBytes, "lg-message-bytes", 0, "langgraph: the text of each message, in bytes (0: the driver's default)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.system == "" || o.work == "" || o.out == "" {
		return nil, errors.New("--system, --work and --out are required")
	}
	if o.procs != result.ProcsPinned && o.procs != result.ProcsDefault {
		return nil, fmt.Errorf("--procs %q: want pinned or default", o.procs)
	}
	var err error
	if o.casClients, err = ints(*cas); err != nil {
		return nil, fmt.Errorf("--cas-clients: %w", err)
	}
	if o.queueWorkers, err = ints(*qw); err != nil {
		return nil, fmt.Errorf("--queue-workers: %w", err)
	}
	if o.lgThreads, err = ints(*lgThreads); err != nil {
		return nil, fmt.Errorf("--lg-threads: %w", err)
	}
	return o, nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	var runs []*result.Run
	for _, w := range strings.Split(o.workloads, ",") {
		w = strings.TrimSpace(w)
		var got []*result.Run
		var err error
		switch o.system {
		case result.SystemEtcd:
			got, err = runEtcd(ctx, o, w)
		case result.SystemPostgres:
			got, err = runPostgres(ctx, o, w)
		default:
			return fmt.Errorf("--system %q: want etcd or postgres", o.system)
		}
		if err != nil {
			failed := &result.Run{System: o.system, Workload: w, Failed: err.Error()}
			if o.system == result.SystemEtcd {
				failed.Procs = o.procs
			}
			got = append(got, failed)
			fmt.Fprintf(os.Stderr, "peerbench: %s %s failed: %v\n", o.system, w, err)
		}
		runs = append(runs, got...)
		if err := result.WriteJSON(o.out, runs); err != nil {
			return err
		}
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peerbench %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// runEtcd runs one workload, on a fresh cluster for each variant.
func runEtcd(ctx context.Context, o *options, workload string) ([]*result.Run, error) {
	p := etcdbench.Params{Warmup: o.warmup, Duration: o.duration, Seed: o.seed}
	rule := cluster.ProcsShare
	if o.procs == result.ProcsDefault {
		rule = cluster.ProcsRuntime
	}
	logf("etcd %s: members' GOMAXPROCS %s", workload, o.procs)
	var runs []*result.Run
	run := func(name string, f func(c *etcdbench.Cluster) (*result.Run, error), extra ...string) error {
		dir := filepath.Join(o.work, "etcd-"+o.procs+"-"+name)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		c, err := etcdbench.StartWith(ctx, o.etcdBin, dir, 3, etcdbench.Options{Extra: extra, Procs: rule})
		if err != nil {
			return err
		}
		defer c.Close()
		r, err := f(c)
		if r != nil {
			r.Procs = o.procs
			runs = append(runs, r)
		}
		return err
	}
	switch workload {
	case result.WorkloadCAS:
		for _, n := range o.casClients {
			logf("etcd cas C=%d", n)
			if err := run(fmt.Sprintf("cas-%d", n), func(c *etcdbench.Cluster) (*result.Run, error) {
				return etcdbench.CAS(ctx, c, p, n)
			}); err != nil {
				return runs, err
			}
		}
	case result.WorkloadQueue:
		for _, n := range o.queueWorkers {
			logf("etcd queue W=%d (preload %d)", n, o.queuePreload)
			if err := run(fmt.Sprintf("queue-%d", n), func(c *etcdbench.Cluster) (*result.Run, error) {
				return etcdbench.Queue(ctx, c, p, n, o.queuePreload)
			}); err != nil {
				return runs, err
			}
		}
	case result.WorkloadRecovery:
		logf("etcd recovery C=%d, %d kills", o.recoveryClients, o.kills.Count)
		return runs, run("recovery", func(c *etcdbench.Cluster) (*result.Run, error) {
			return etcdbench.Recovery(ctx, c, p, o.recoveryClients, o.kills)
		})
	case result.WorkloadSoak:
		logf("etcd soak C=%d for %v, memory every %v", o.soakClients, o.warmup+o.duration, o.soakSample)
		return runs, run("soak", func(c *etcdbench.Cluster) (*result.Run, error) {
			return etcdbench.Soak(ctx, c, p, o.soakClients, o.soakSample)
		}, etcdbench.SoakArgs...)
	default:
		return nil, fmt.Errorf("etcd has no %q workload (cas, queue, recovery, soak)", workload)
	}
	return runs, nil
}

func runPostgres(ctx context.Context, o *options, workload string) ([]*result.Run, error) {
	if workload != result.WorkloadQueue && workload != result.WorkloadLangGraph {
		return nil, fmt.Errorf("postgres has no %q workload (queue, langgraph)", workload)
	}
	bin := o.pgBin
	if bin == "" {
		var err error
		if bin, err = pgbench.FindBinDir(); err != nil {
			return nil, err
		}
	}
	if workload == result.WorkloadLangGraph {
		return langgraphPostgres(ctx, o, bin)
	}
	var runs []*result.Run
	for _, n := range o.queueWorkers {
		dir := filepath.Join(o.work, fmt.Sprintf("postgres-queue-%d", n))
		if err := os.RemoveAll(dir); err != nil {
			return runs, err
		}
		s, err := pgbench.Start(ctx, bin, dir, n)
		if err != nil {
			return runs, err
		}
		logf("postgres queue W=%d (preload %d)", n, o.queuePreload)
		r, err := pgbench.Queue(ctx, s, pgbench.Params{Warmup: o.warmup, Duration: o.duration, Seed: o.seed}, n, o.queuePreload)
		s.Close()
		if err != nil {
			return runs, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// langgraphPostgres runs the LangGraph step through langgraph-checkpoint-
// postgres's AsyncPostgresSaver (bench/python/lgbench.py), on a fresh
// server for each thread count, set up as for the queue workload.
func langgraphPostgres(ctx context.Context, o *options, bin string) ([]*result.Run, error) {
	if o.python == "" || o.lgScript == "" {
		return nil, errors.New("langgraph needs --python and --lg-script")
	}
	var runs []*result.Run
	for _, n := range o.lgThreads {
		dir := filepath.Join(o.work, fmt.Sprintf("postgres-langgraph-%d", n))
		if err := os.RemoveAll(dir); err != nil {
			return runs, err
		}
		s, err := pgbench.Start(ctx, bin, dir, n)
		if err != nil {
			return runs, err
		}
		logf("postgres langgraph T=%d", n)
		args := []string{"--saver", "postgres", "--dsn", s.URL(), "--threads", strconv.Itoa(n),
			"--steps-per-thread", strconv.Itoa(o.lgSteps), "--warmup", o.warmup.String(),
			"--duration", o.duration.String(), "--seed", strconv.FormatUint(o.seed, 10)}
		if o.lgMessageBytes > 0 {
			args = append(args, "--message-bytes", strconv.Itoa(o.lgMessageBytes))
		}
		r, err := pyrun.Run(ctx, o.python, o.lgScript, args, os.Stderr)
		s.Close()
		if err != nil {
			return runs, err
		}
		r.Procs = result.ProcsDefault
		runs = append(runs, r)
	}
	return runs, nil
}
