package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/baton-dev/baton/cmd/batond/cluster"
)

const localUsageText = `batond local: run a Baton cluster of N batond processes on this machine.

Usage:
  batond local [--nodes 3] [--dir DIR] [--base-http-port 7001] [--base-raft-port 8001] [--insecure]

Starts N copies of this batond on 127.0.0.1: node nK serves HTTP on
base-http-port+K-1 and Raft on base-raft-port+K-1, keeps its data in DIR/nK/data
and its log in DIR/nK/batond.log. The admin token is created once in
DIR/admin-token and reused, so running it again resumes the same cluster and
data (delete DIR to start afresh). Once a leader is elected and every node is
ready, it prints the endpoints, the token and the lines to export for
'bin/baton'. A node that dies is reported, not restarted. Ctrl-C or SIGTERM
stops every node cleanly. The nodes share this machine's cores: each runs
with GOMAXPROCS at its share (cores / N, at least 1) unless GOMAXPROCS is
set in the environment.

The cluster runs TLS everywhere: a throwaway CA and node certificates are
made in DIR/tls (kept for the next run), every node serves its API over
https and talks to its peers (Raft and node-to-node HTTP) over mutual TLS.
Clients trust the CA through BATON_CACERT (printed with the other exports).
--insecure runs plain HTTP and plaintext Raft instead.

Flags:
`

type localOptions struct {
	nodes        int
	dir          string
	baseHTTP     int
	baseRaft     int
	logLevel     string
	readyTimeout time.Duration
	insecure     bool
}

func parseLocalFlags(args []string, stderr io.Writer) (*localOptions, error) {
	o := &localOptions{}
	fs := flag.NewFlagSet("batond local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, localUsageText); fs.PrintDefaults() }
	fs.IntVar(&o.nodes, "nodes", 3, fmt.Sprintf("number of nodes, 1 to %d", cluster.MaxNodes))
	fs.StringVar(&o.dir, "dir", filepath.Join(os.TempDir(), "baton-local"), "directory for the nodes' data, logs and the admin token")
	fs.IntVar(&o.baseHTTP, "base-http-port", 7001, "HTTP port of n1; nK gets base+K-1")
	fs.IntVar(&o.baseRaft, "base-raft-port", 8001, "Raft port of n1; nK gets base+K-1")
	fs.StringVar(&o.logLevel, "log-level", "info", "the nodes' log level: debug, info, warn or error")
	fs.DurationVar(&o.readyTimeout, "timeout", time.Minute, "how long to wait for a leader and every node ready")
	fs.BoolVar(&o.insecure, "insecure", false, "no TLS: plain HTTP API and plaintext Raft")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	if o.nodes < 1 || o.nodes > cluster.MaxNodes {
		return nil, fmt.Errorf("--nodes %d: want 1 to %d", o.nodes, cluster.MaxNodes)
	}
	for _, p := range []struct {
		name string
		base int
	}{{"--base-http-port", o.baseHTTP}, {"--base-raft-port", o.baseRaft}} {
		if p.base < 1 || p.base+o.nodes-1 > 65535 {
			return nil, fmt.Errorf("%s %d: ports %d-%d are out of range", p.name, p.base, p.base, p.base+o.nodes-1)
		}
	}
	if o.readyTimeout <= 0 {
		return nil, fmt.Errorf("--timeout %v: want > 0", o.readyTimeout)
	}
	return o, nil
}

// runLocal is `batond local`: it runs a cluster of this executable until ctx
// ends, then stops it. It returns the process exit code.
func runLocal(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseLocalFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "batond local:", err)
		return 2
	}
	c, err := newLocalCluster(o)
	if err != nil {
		fmt.Fprintln(stderr, "batond local:", err)
		return 1
	}
	defer c.Close()
	fmt.Fprintf(stdout, "Starting %d batond nodes in %s ...\n", o.nodes, o.dir)
	leader, err := startLocal(ctx, c, o)
	if err != nil {
		c.Close()
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "batond local: interrupted; every node is stopped")
			return 0
		}
		fmt.Fprintln(stderr, "batond local:", err)
		if errors.Is(err, cluster.ErrPortInUse) {
			fmt.Fprintln(stderr, "batond local: is another cluster running? Stop it, or pick other ports with --base-http-port and --base-raft-port.")
		}
		if errors.Is(err, cluster.ErrLayout) {
			fmt.Fprintf(stderr, "batond local: run with the same --nodes and ports as before, or delete %s to start afresh.\n", o.dir)
		}
		return 1
	}
	printLocal(stdout, c, o, leader)
	return superviseLocal(ctx, c, o, stdout, stderr)
}

// newLocalCluster prepares DIR and its admin token and builds the cluster.
func newLocalCluster(o *localOptions) (*cluster.Cluster, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable: %w", err)
	}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return nil, err
	}
	token, _, err := cluster.LoadOrCreateToken(tokenPath(o))
	if err != nil {
		return nil, err
	}
	return cluster.New(cluster.Config{
		Binary:     exe,
		Nodes:      o.nodes,
		BaseDir:    o.dir,
		AdminToken: token,
		HTTPPorts:  cluster.SequentialPorts(o.baseHTTP, o.nodes),
		RaftPorts:  cluster.SequentialPorts(o.baseRaft, o.nodes),
		ExtraArgs:  []string{"--log-level=" + o.logLevel},
		TLS:        !o.insecure,
	})
}

func tokenPath(o *localOptions) string { return filepath.Join(o.dir, "admin-token") }

// startLocal starts every node and waits for a leader and for every node to
// be ready; it returns the leader's index.
func startLocal(ctx context.Context, c *cluster.Cluster, o *localOptions) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, o.readyTimeout)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return -1, err
	}
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		return -1, fmt.Errorf("%w\nsee the logs: %s", err, strings.Join(logPaths(c), " "))
	}
	for i := range c.Size() {
		if err := c.WaitReady(ctx, i); err != nil {
			return -1, fmt.Errorf("%w\nsee its log: %s", err, c.LogPath(i))
		}
	}
	return leader, nil
}

func logPaths(c *cluster.Cluster) []string {
	paths := make([]string, c.Size())
	for i := range paths {
		paths[i] = c.LogPath(i)
	}
	return paths
}

// printLocal tells the user where everything is and how to use it.
func printLocal(w io.Writer, c *cluster.Cluster, o *localOptions, leader int) {
	fmt.Fprintf(w, "\nBaton is running: %d nodes, leader %s.\n\n", c.Size(), c.ID(leader))
	fmt.Fprintf(w, "  data directory  %s\n", o.dir)
	fmt.Fprintf(w, "  admin token     %s  (kept in %s)\n", c.AdminToken(), tokenPath(o))
	if ca := c.CAFile(); ca != "" {
		fmt.Fprintf(w, "  CA certificate  %s  (TLS everywhere; --insecure for plain HTTP)\n", ca)
	} else {
		fmt.Fprintf(w, "  TLS             off (--insecure)\n")
	}
	fmt.Fprintf(w, "  web console     %s/ui/  (sign in with the admin token; docs/console.md)\n", c.URL(leader))
	fmt.Fprintln(w)
	for i := range c.Size() {
		role := ""
		if i == leader {
			role = " (leader)"
		}
		fmt.Fprintf(w, "  %-3s %-24s log %s%s\n", c.ID(i), c.URL(i), c.LogPath(i), role)
	}
	fmt.Fprintf(w, "\nIn another shell:\n\n")
	fmt.Fprintf(w, "  export BATON_ENDPOINTS=%s\n", strings.Join(c.Endpoints(), ","))
	fmt.Fprintf(w, "  export BATON_TOKEN=%s\n", c.AdminToken())
	if ca := c.CAFile(); ca != "" {
		fmt.Fprintf(w, "  export BATON_CACERT=%s\n", ca)
	}
	fmt.Fprintf(w, "  bin/baton status\n\n")
	fmt.Fprintf(w, "Ctrl-C stops the cluster. Its data stays in %s for the next run\n(delete that directory to start afresh).\n", o.dir)
}

// superviseLocal reports nodes that die until ctx ends, then stops the
// cluster. A dead node is not restarted: its log says why it died.
func superviseLocal(ctx context.Context, c *cluster.Cluster, o *localOptions, stdout, stderr io.Writer) int {
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout, "\nStopping the cluster ...")
			if err := c.Close(); err != nil {
				fmt.Fprintln(stderr, "batond local: stop:", err)
				return 1
			}
			fmt.Fprintf(stdout, "Stopped. Data kept in %s.\n", o.dir)
			return 0
		case e := <-c.Exits():
			fmt.Fprintf(stderr, "batond local: %s exited unexpectedly (%v); see its log: %s\n", e.ID, exitReason(e.Err), e.LogPath)
			if !anyRunning(c) {
				fmt.Fprintln(stderr, "batond local: no node is left running")
				c.Close()
				return 1
			}
			fmt.Fprintln(stderr, "batond local: the other nodes keep running; it is not restarted (Ctrl-C stops all).")
		}
	}
}

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func anyRunning(c *cluster.Cluster) bool {
	for i := range c.Size() {
		if c.Running(i) {
			return true
		}
	}
	return false
}
