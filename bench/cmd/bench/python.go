package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/baton-dev/baton/bench/baton"
	"github.com/baton-dev/baton/bench/pyrun"
	"github.com/baton-dev/baton/bench/result"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// The Python rows: sdk (issue 28), the cas operation through the Python
// SDK (bench/python/sdkbench.py, in the venv make test-python builds) and
// the Go SDK on one cluster; langgraph (issue 29), a LangGraph step through
// Baton's, PostgreSQL's and SQLite's savers (bench/python/lgbench.py, in
// the bench venv of bench/python/requirements.txt).

const (
	sdkScript = "bench/python/sdkbench.py"
	lgScript  = "bench/python/lgbench.py"
)

func (s *suite) needPython() bool {
	for _, w := range pythonWorkloads {
		if slices.Contains(s.o.workloads, w) {
			return true
		}
	}
	return false
}

// rootPath is p relative to the module root, unless absolute.
func rootPath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	root, err := cluster.ModuleRoot()
	if err != nil {
		return p
	}
	return filepath.Join(root, p)
}

// preparePython makes or updates the venvs (bench/python/venv.sh: the
// client installed from the tree) and records the versions that matter.
func (s *suite) preparePython(ctx context.Context) error {
	o := s.o
	o.pythonSDK, o.pythonLG = rootPath(o.pythonSDK), rootPath(o.pythonLG)
	if o.pythonVenv {
		var err error
		s.phase("python venvs", func() error {
			cmd := exec.CommandContext(ctx, "bash", rootPath("bench/python/venv.sh"))
			cmd.Dir = rootPath(".")
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			err = cmd.Run()
			return err
		})
		if err != nil {
			return fmt.Errorf("bench/python/venv.sh: %w", err)
		}
	}
	versions := func(python string, pkgs ...string) string {
		code := `import sys, importlib.metadata as m
out = ["Python " + sys.version.split()[0]]
for p in sys.argv[1:]:
    if p == "sqlite3":
        import sqlite3
        out.append("SQLite " + sqlite3.sqlite_version)
        continue
    try:
        out.append(p + " " + m.version(p))
    except m.PackageNotFoundError:
        pass
print(", ".join(out))`
		b, err := exec.CommandContext(ctx, python, append([]string{"-c", code}, pkgs...)...).Output()
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		return strings.TrimSpace(string(b))
	}
	if slices.Contains(o.workloads, result.WorkloadSDK) {
		s.res.Machine.Versions["Python SDK row (bin/py)"] = versions(o.pythonSDK, "baton-client", "httpx")
	}
	if slices.Contains(o.workloads, result.WorkloadLangGraph) {
		s.res.Machine.Versions["LangGraph row (bin/py-bench)"] = versions(o.pythonLG, "langgraph-checkpoint",
			"langgraph-checkpoint-postgres", "psycopg", "psycopg-pool", "langgraph-checkpoint-sqlite", "aiosqlite", "sqlite3")
	}
	return nil
}

// loadArgs are the timings every Python driver takes.
func (s *suite) loadArgs() []string {
	return []string{"--warmup", s.plan.warmup.String(), "--duration", s.plan.duration.String(), "--seed", fmt.Sprint(s.o.seed)}
}

// batonArgs point a Python driver at env's cluster.
func batonArgs(env *baton.Env) []string {
	return []string{"--endpoints", strings.Join(env.Cluster.Endpoints(), ","), "--token", env.Token, "--tenant", baton.Tenant}
}

// sdk runs, for each client count, the cas operation through the Go SDK,
// the Python SDK (one AsyncClient shared by the workers) and the Python
// SDK with an AsyncClient per worker, one after the other on one fresh
// cluster, round r starting with the r-th of them (in turn).
func (s *suite) sdk(ctx context.Context, run func(name string, f func(env *baton.Env) ([]*result.Run, error)) error) error {
	p := s.params()
	for _, n := range s.plan.sdkClients {
		err := run(fmt.Sprintf("sdk-%d", n), func(env *baton.Env) ([]*result.Run, error) {
			goRun := func() (*result.Run, error) {
				logf("  baton sdk C=%d: Go SDK", n)
				r, err := baton.CAS(ctx, env, p, n)
				if r != nil {
					r.Workload, r.Client = result.WorkloadSDK, result.ClientGo
				}
				return r, err
			}
			pyRun := func(client string) func() (*result.Run, error) {
				return func() (*result.Run, error) {
					logf("  baton sdk C=%d: Python SDK (%s)", n, client)
					args := append(batonArgs(env), append([]string{"--clients", fmt.Sprint(n)}, s.loadArgs()...)...)
					if client == result.ClientPythonPerWorker {
						args = append(args, "--workers-per-client", "1", "--prefix", fmt.Sprintf("pywcas%d-", n))
					}
					r, err := pyrun.Run(ctx, s.o.pythonSDK, rootPath(sdkScript), args, os.Stderr)
					if r != nil {
						r.System, r.Workload, r.Client = result.SystemBaton, result.WorkloadSDK, client
					}
					return r, err
				}
			}
			type sdkRun struct {
				client string
				f      func() (*result.Run, error)
			}
			order := []sdkRun{{result.ClientGo, goRun}, {result.ClientPython, pyRun(result.ClientPython)},
				{result.ClientPythonPerWorker, pyRun(result.ClientPythonPerWorker)},
				{result.ClientTypeScript, func() (*result.Run, error) { return s.tsRun(ctx, env, n) }}}
			if s.round > 1 { // round r starts with the (r-1)th
				k := (s.round - 1) % len(order)
				order = append(order[k:], order[:k]...)
			}
			var out []*result.Run
			for _, o := range order {
				r, err := o.f()
				if err != nil {
					out = append(out, &result.Run{System: result.SystemBaton, Workload: result.WorkloadSDK,
						Variant: fmt.Sprintf("C=%d", n), Client: o.client, Failed: err.Error()})
					continue
				}
				out = append(out, r)
			}
			return out, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// lgArgs are the langgraph driver's arguments for T threads.
func (s *suite) lgArgs(threads int) []string {
	args := []string{"--threads", fmt.Sprint(threads), "--steps-per-thread", fmt.Sprint(s.plan.lgSteps)}
	if s.o.lgMessageBytes > 0 {
		args = append(args, "--message-bytes", fmt.Sprint(s.o.lgMessageBytes))
	}
	return append(args, s.loadArgs()...)
}

// langgraphBaton runs the LangGraph step through AsyncBatonSaver, on a
// fresh cluster for each thread count.
func (s *suite) langgraphBaton(ctx context.Context, run func(name string, f func(env *baton.Env) ([]*result.Run, error)) error) error {
	for _, n := range s.plan.lgThreads {
		err := run(fmt.Sprintf("langgraph-%d", n), func(env *baton.Env) ([]*result.Run, error) {
			logf("  baton langgraph T=%d", n)
			args := append([]string{"--saver", "baton"}, append(batonArgs(env), s.lgArgs(n)...)...)
			r, err := pyrun.Run(ctx, s.o.pythonLG, rootPath(lgScript), args, os.Stderr)
			if err != nil {
				return nil, err
			}
			return []*result.Run{r}, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// sqlite runs the LangGraph step through AsyncSqliteSaver, a fresh
// database file for each thread count.
func (s *suite) sqlite(ctx context.Context, w string) ([]*result.Run, error) {
	if w != result.WorkloadLangGraph {
		return nil, fmt.Errorf("sqlite has no %q workload (langgraph)", w)
	}
	var runs []*result.Run
	for _, n := range s.plan.lgThreads {
		dir := filepath.Join(s.work, fmt.Sprintf("sqlite-langgraph-%d", n))
		if err := os.RemoveAll(dir); err != nil {
			return runs, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return runs, err
		}
		logf("  sqlite langgraph T=%d", n)
		args := append([]string{"--saver", "sqlite", "--sqlite-path", filepath.Join(dir, "checkpoints.db")}, s.lgArgs(n)...)
		r, err := pyrun.Run(ctx, s.o.pythonLG, rootPath(lgScript), args, os.Stderr)
		if err != nil {
			return runs, err
		}
		r.Procs = result.ProcsDefault
		runs = append(runs, r)
	}
	return runs, nil
}

// lgPeerArgs are peerbench's flags for PostgreSQL's LangGraph saver.
func (s *suite) lgPeerArgs() []string {
	return []string{"--python", s.o.pythonLG, "--lg-script", rootPath(lgScript),
		"--lg-threads", joinInts(s.plan.lgThreads), "--lg-steps", fmt.Sprint(s.plan.lgSteps),
		"--lg-message-bytes", fmt.Sprint(s.o.lgMessageBytes)}
}
