package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/baton-dev/baton/bench/baton"
	"github.com/baton-dev/baton/bench/pyrun"
	"github.com/baton-dev/baton/bench/result"
)

// The TypeScript row of the sdk workload: the cas operation through the
// TypeScript SDK (client/typescript/bench/sdkbench.ts, built to
// client/typescript/dist-bench), one Node process whose workers share one
// BatonClient, beside the Go and Python SDKs on the same cluster. The
// driver prints one result.Run as JSON, as the Python drivers do, so
// pyrun reads it.

const (
	tsDir    = "client/typescript"
	tsScript = "client/typescript/dist-bench/sdkbench.js"
)

// prepareTypeScript builds the SDK and the driver (npm ci from the
// lockfile, tsc) and records the Node version.
func (s *suite) prepareTypeScript(ctx context.Context) error {
	o := s.o
	if o.tsBuild {
		var err error
		s.phase("typescript driver", func() error {
			for _, args := range [][]string{
				{"npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"},
				{"npx", "tsc", "-p", "tsconfig.json"},
				{"npx", "tsc", "-p", "tsconfig.bench.json"},
			} {
				cmd := exec.CommandContext(ctx, args[0], args[1:]...)
				cmd.Dir = rootPath(tsDir)
				cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
				if err = cmd.Run(); err != nil {
					return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("build the TypeScript driver: %w", err)
		}
	}
	v := "unknown"
	if b, err := exec.CommandContext(ctx, o.node, "--version").Output(); err == nil {
		v = strings.TrimSpace(string(b))
	}
	s.res.Machine.Versions["TypeScript SDK row"] = "Node " + v
	return nil
}

// tsRun runs the cas operation at C=n through the TypeScript SDK.
func (s *suite) tsRun(ctx context.Context, env *baton.Env, n int) (*result.Run, error) {
	logf("  baton sdk C=%d: TypeScript SDK", n)
	args := append(batonArgs(env), append([]string{"--clients", fmt.Sprint(n)}, s.loadArgs()...)...)
	r, err := pyrun.Run(ctx, s.o.node, rootPath(tsScript), args, os.Stderr)
	if r != nil {
		r.System, r.Workload, r.Client = result.SystemBaton, result.WorkloadSDK, result.ClientTypeScript
	}
	return r, err
}
