package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/node"
)

const recoverUsageText = `batond recover: turn a surviving member into a new cluster after quorum loss.

Usage:
  batond recover --data-dir DIR --id n1 --peers n1=10.0.0.1:8001[,n4=...]

For a cluster that lost a majority of its members for good. With batond
stopped on DIR, rewrites its Raft configuration to --peers (hashicorp/raft's
RecoverCluster, as Consul's peers.json): the newest snapshot and every entry
of the local log after it are applied, committed or not, into a new
snapshot that holds the new configuration, and the log is emptied. Then
start batond on DIR as before: with --peers naming itself alone it serves at
once as a one-node cluster; add members back with --join.

Run it on one survivor only when the others are gone for good; when several
survive, run it on each with the same --peers, and never start a member
that was not recovered alongside. Entries that never reached this member
are lost; entries it holds that were never committed are kept.

Flags:
`

func runRecover(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("batond recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, recoverUsageText); fs.PrintDefaults() }
	dataDir := fs.String("data-dir", "", "the surviving member's data directory; batond must be stopped (required)")
	id := fs.String("id", "", "the surviving member's id (required)")
	peersFlag := fs.String("peers", "", "the new configuration's voters ID=HOST:PORT,... including --id (required)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	peers, err := offlinePeers(fs, *dataDir, *id, *peersFlag)
	if err != nil {
		fmt.Fprintln(stderr, "batond recover:", err, "(see --help)")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := node.Recover(*dataDir, *id, peers, fsm.New(), log)
	if err != nil {
		fmt.Fprintln(stderr, "batond recover:", err)
		return 1
	}
	fmt.Fprintf(stdout, "recovered %s in %s: state %s at index %d; configuration now %s\n",
		*id, *dataDir, res.Status.StateDigest, res.Status.AppliedIndex, *peersFlag)
	return 0
}
