// Command chaos runs Baton's chaos suite: seeded runs of real batond
// processes under injected faults, with a recorded history and checkers.
//
//	go run ./chaos/cmd/chaos --runs 100                 # what `make chaos` runs
//	go run ./chaos/cmd/chaos --runs 1 --seed 42         # replay one run
//	go run ./chaos/cmd/chaos --nodes 5 --runs 10
//	go run ./chaos/cmd/chaos --netns --runs 30         # members in network namespaces, faults in the network (root)
//	go run ./chaos/cmd/chaos --endpoints http://127.0.0.1:7001,http://127.0.0.1:7002,http://127.0.0.1:7003 \
//	    --token-file /tmp/baton-local/admin-token       # against `batond local --insecure` (plain HTTP only)
//
// It prints one line per run, then the summary table and the closing line
// "chaos: N runs, M faults, K ops, A anomalies". The exit status is 1 when
// any run found an anomaly; failing runs are saved under --out with the
// command that replays them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/baton-dev/baton/chaos/checker"
	"github.com/baton-dev/baton/chaos/faults"
	"github.com/baton-dev/baton/chaos/history"
	"github.com/baton-dev/baton/chaos/netns"
	"github.com/baton-dev/baton/chaos/runner"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

type options struct {
	runs         int
	seed         int64
	nodes        int
	traffic      time.Duration
	faultsPerRun int
	kinds        string
	out          string
	keep         bool
	batond       string
	endpoints    string
	token        string
	tokenFile    string
	verbose      bool
	check        string
	insecure     bool
	netns        bool
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.runs, "runs", 1, "number of runs; run k uses seed+k")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the first run (0: from the clock, printed)")
	fs.IntVar(&o.nodes, "nodes", 3, "cluster size: 3 or 5")
	fs.DurationVar(&o.traffic, "traffic", 8*time.Second, "how long the agents run in each run")
	fs.IntVar(&o.faultsPerRun, "faults-per-run", 3, "faults planned per run (fewer when they do not fit)")
	fs.StringVar(&o.kinds, "kinds", "all", "fault kinds, comma-separated: "+kindList())
	fs.StringVar(&o.out, "out", "", "directory for run artifacts; failing runs are kept (default: a new temp dir)")
	fs.BoolVar(&o.keep, "keep", false, "keep the artifacts of passing runs too")
	fs.StringVar(&o.batond, "batond", "", "batond binary (default: build ./cmd/batond)")
	fs.StringVar(&o.endpoints, "endpoints", "", "run against this existing cluster (comma-separated URLs): workload and checkers, no faults")
	fs.StringVar(&o.token, "token", "", "admin token for --endpoints (or BATON_ADMIN_TOKEN)")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the admin token for --endpoints")
	fs.BoolVar(&o.verbose, "v", false, "print the faults as they are injected")
	fs.BoolVar(&o.insecure, "insecure", false, "run the clusters over plain HTTP (default: TLS everywhere, as batond local)")
	fs.StringVar(&o.check, "check", "", "only run the checkers on a saved history.json and print their report")
	fs.BoolVar(&o.netns, "netns", false, "run every member in a network namespace of its own and make the partitions, one-way loss, delay and flapping links in the network (needs root; --kinds all is then every kind, net the network's)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.runs < 1 {
		return nil, fmt.Errorf("--runs %d: want at least 1", o.runs)
	}
	if o.nodes != 3 && o.nodes != 5 {
		return nil, fmt.Errorf("--nodes %d: want 3 or 5", o.nodes)
	}
	if o.netns && o.endpoints != "" {
		return nil, errors.New("--netns and --endpoints do not go together")
	}
	if o.traffic < 2*time.Second {
		return nil, fmt.Errorf("--traffic %v: want at least 2s", o.traffic)
	}
	return o, nil
}

func kindList() string {
	var s []string
	for _, k := range faults.AllKinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ",") + " (" + strings.Join(kindNames(faults.Kinds), ",") + " without --netns)"
}

func kindNames(kinds []faults.Kind) []string {
	var s []string
	for _, k := range kinds {
		s = append(s, string(k))
	}
	return s
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	if o.check != "" {
		return recheck(o.check, stdout, stderr)
	}
	inside, err := netns.FromEnv()
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	if o.netns && inside == nil {
		return outside(ctx, o, args, stdout, stderr)
	}
	cfg, err := configure(ctx, o, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	if o.netns {
		cfg.Netns = inside
		if o.kinds == "all" {
			cfg.Kinds = faults.AllKinds
		}
	}
	fmt.Fprintf(stdout, "chaos: %d runs from seed %d, %s, artifacts in %s\n", o.runs, o.seed, mode(o), cfg.OutDir)
	n := 0
	s := runner.Series(ctx, cfg, o.runs, func(r *runner.Result) {
		n++
		status := "ok"
		if r.Failed() {
			status = "FAILED"
		}
		fmt.Fprintf(stdout, "run %d/%d seed %d: %s, %d faults, %d ops (ok %d, failed %d, unknown %d), %d anomalies, %.1fs\n",
			n, o.runs, r.Seed, status, len(r.Faults), r.Ops.Total, r.Ops.OK, r.Ops.Fail, r.Ops.Unknown, len(r.Anomalies), r.Duration.Seconds())
		if r.Err != nil {
			fmt.Fprintf(stdout, "  harness error: %v\n", r.Err)
		}
		for _, a := range r.Anomalies {
			fmt.Fprintf(stdout, "  %s\n", a.String())
		}
	})
	fmt.Fprintln(stdout)
	s.Table(stdout)
	if s.TotalAnomalies() > 0 || ctx.Err() != nil {
		return 1
	}
	return 0
}

func mode(o *options) string {
	if o.endpoints != "" {
		return "against " + o.endpoints + " (no faults)"
	}
	where := ""
	if o.netns {
		where = " in network namespaces"
	}
	return fmt.Sprintf("%d nodes%s, %v of traffic, %d faults per run", o.nodes, where, o.traffic, o.faultsPerRun)
}

// outside makes the network namespaces of --netns, runs this command again
// inside them (where the members can be reached) with the same flags, and
// removes them when it ends.
func outside(ctx context.Context, o *options, args []string, stdout, stderr io.Writer) int {
	if err := netns.EnsureTools(ctx, func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }); err != nil {
		fmt.Fprintln(stderr, "chaos: --netns:", err)
		return 2
	}
	if err := netns.Check(); err != nil {
		fmt.Fprintln(stderr, "chaos: --netns: cannot make network namespaces here:", err)
		return 2
	}
	if swept, err := netns.Sweep(); err != nil {
		fmt.Fprintln(stderr, "chaos: sweep:", err)
	} else if len(swept) > 0 {
		fmt.Fprintf(stderr, "chaos: removed namespaces left by earlier runs: %v\n", swept)
	}
	if o.batond == "" { // build once, here, for the command inside
		dir, err := os.MkdirTemp("", "baton-chaos-bin-")
		if err != nil {
			fmt.Fprintln(stderr, "chaos:", err)
			return 2
		}
		defer os.RemoveAll(dir)
		bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		o.batond, err = cluster.BuildBatond(bctx, dir)
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "chaos:", err)
			return 2
		}
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano() % 1_000_000
	}
	n, err := netns.Setup(ctx, o.nodes)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	defer func() {
		if err := n.Close(); err != nil {
			fmt.Fprintln(stderr, "chaos:", err)
		}
	}()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	batond, err := filepath.Abs(o.batond)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	// Later flags win: the seed chosen here and the binary built here.
	cmd := n.Command(ctx, exe, append(args, "--seed", fmt.Sprint(o.seed), "--batond", batond)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() > 0 {
			return exit.ExitCode()
		}
		fmt.Fprintln(stderr, "chaos: --netns:", err)
		return 2
	}
	return 0
}

// configure turns the options into a runner configuration, building batond
// when needed.
func configure(ctx context.Context, o *options, stdout io.Writer) (runner.Config, error) {
	if o.seed == 0 {
		o.seed = time.Now().UnixNano() % 1_000_000
	}
	kinds, err := faults.ParseKinds(o.kinds)
	if err != nil {
		return runner.Config{}, err
	}
	cfg := runner.Config{Nodes: o.nodes, Seed: o.seed, Traffic: o.traffic, FaultsPerRun: o.faultsPerRun,
		Kinds: kinds, Keep: o.keep, OutDir: o.out, TLS: !o.insecure && o.endpoints == ""}
	if cfg.OutDir == "" {
		if cfg.OutDir, err = os.MkdirTemp("", "baton-chaos-"); err != nil {
			return cfg, err
		}
	}
	if cfg.OutDir, err = filepath.Abs(cfg.OutDir); err != nil {
		return cfg, err
	}
	if o.verbose {
		cfg.Logf = func(format string, args ...any) { fmt.Fprintf(stdout, "  "+format+"\n", args...) }
	}
	if o.endpoints != "" {
		cfg.Endpoints = strings.Split(o.endpoints, ",")
		cfg.AdminToken, err = adminToken(o)
		return cfg, err
	}
	cfg.Binary = o.batond
	if cfg.Binary == "" {
		bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if cfg.Binary, err = cluster.BuildBatond(bctx, cfg.OutDir); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

func adminToken(o *options) (string, error) {
	switch {
	case o.token != "":
		return o.token, nil
	case o.tokenFile != "":
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	case os.Getenv("BATON_ADMIN_TOKEN") != "":
		return os.Getenv("BATON_ADMIN_TOKEN"), nil
	}
	return "", errors.New("--endpoints needs the admin token: --token, --token-file or BATON_ADMIN_TOKEN")
}

// recheck runs the checkers on a saved history.
func recheck(path string, stdout, stderr io.Writer) int {
	h, err := history.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	r := checker.Check(h, checker.Options{SkipConvergence: len(h.Nodes) == 0})
	fmt.Fprintf(stdout, "%s: seed %d, %d ops, %d faults\n", path, h.Seed, len(h.Ops), len(h.Faults))
	fmt.Fprint(stdout, r.Summary())
	fmt.Fprintf(stdout, "%d anomalies\n", len(r.Anomalies))
	if !r.OK() {
		return 1
	}
	return 0
}
