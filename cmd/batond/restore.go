package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/chunkstore"
	"github.com/baton-dev/baton/server/core/node"
	"github.com/hashicorp/raft"
)

const restoreUsageText = `batond restore: seed a member of a new cluster from a backup.

Usage:
  batond restore --from FILE --data-dir DIR --id n1 \
                 --peers n1=10.0.0.1:8001,n2=10.0.0.2:8001,n3=10.0.0.3:8001

Reads a backup written by 'baton backup save' and writes into DIR (which
must be empty or absent) the backup's state as the only Raft snapshot, with
--peers as the cluster's configuration, and the body of every chunk into
the chunk store, each verified against its digest; the state is loaded
once to check that it has the digest the backup names. Nothing is left in
DIR when any check fails.

Run it once per member, with the same --from and --peers and each member's
own --id and --data-dir, then start every member as usual (its --peers are
then ignored: the data dir holds the configuration). The new cluster starts
with the backup's state at the backup's index.

Flags:
`

func runRestore(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("batond restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, restoreUsageText); fs.PrintDefaults() }
	from := fs.String("from", "", "the backup file (required)")
	dataDir := fs.String("data-dir", "", "the new member's data directory, empty or absent (required)")
	id := fs.String("id", "", "the new member's id, one of --peers (required)")
	peersFlag := fs.String("peers", "", "the new cluster's voters ID=HOST:PORT,... (their Raft addresses; required)")
	compression := fs.String("chunk-compression", string(chunkstore.CompressionNone), "how the chunks are written: none, or zstd (as the node's own --chunk-compression)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	peers, err := offlinePeers(fs, *dataDir, *id, *peersFlag)
	if err == nil && *from == "" {
		err = errors.New("--from is required")
	}
	if err == nil && !validCompression(*compression) {
		err = fmt.Errorf("--chunk-compression %q: want none or zstd", *compression)
	}
	if err != nil {
		fmt.Fprintln(stderr, "batond restore:", err, "(see --help)")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sum, err := restore(*from, *dataDir, peers, chunkstore.Compression(*compression), log)
	if err != nil {
		fmt.Fprintln(stderr, "batond restore:", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored %s into %s: state %s at index %d (verified), %d chunks (%d bytes, verified)\n",
		*id, *dataDir, sum.Header.StateDigest, sum.Header.AppliedIndex, sum.End.Chunks, sum.End.ChunkBytes)
	return 0
}

// offlinePeers checks the flags restore and recover share.
func offlinePeers(fs *flag.FlagSet, dataDir, id, peersFlag string) ([]raft.Server, error) {
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case dataDir == "":
		return nil, errors.New("--data-dir is required")
	case id == "":
		return nil, errors.New("--id is required")
	case peersFlag == "":
		return nil, errors.New("--peers is required")
	}
	peers, err := node.ParsePeers(peersFlag)
	if err != nil {
		return nil, fmt.Errorf("--peers: %w", err)
	}
	for _, p := range peers {
		if string(p.ID) == id {
			return peers, nil
		}
	}
	return nil, fmt.Errorf("--peers %q does not list --id %q", peersFlag, id)
}

// restore seeds dataDir from the backup at from. On any failure it removes
// what it wrote (dataDir was empty).
func restore(from, dataDir string, peers []raft.Server, compression chunkstore.Compression, log *slog.Logger) (sum *client.BackupSummary, err error) {
	entries, err := os.ReadDir(dataDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	case len(entries) > 0:
		return nil, fmt.Errorf("%s is not empty: restore seeds a new member only (move its contents away first)", dataDir)
	}
	f, err := os.Open(from)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			entries, _ := os.ReadDir(dataDir)
			for _, e := range entries {
				os.RemoveAll(filepath.Join(dataDir, e.Name()))
			}
		}
	}()
	br, err := client.NewBackupReader(f)
	if err != nil {
		return nil, err
	}
	if err := node.Seed(dataDir, br.Header.AppliedIndex, peers, br.State(), log); err != nil {
		return nil, err
	}
	store, err := chunkstore.Open(filepath.Join(dataDir, "chunks"), chunkstore.WithCompression(compression))
	if err != nil {
		return nil, err
	}
	defer store.Close()
	for {
		digest, body, err := br.NextChunk()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := store.Put(digest, body); err != nil {
			return nil, fmt.Errorf("chunk %s: %w", digest, err)
		}
	}
	// The whole file verified (its end frame): now load the state as the
	// node will, and compare its digest with the backup's.
	meta, rc, err := node.OpenSnapshot(dataDir, log)
	if err != nil {
		return nil, err
	}
	st := fsm.New()
	if err := st.Restore(rc); err != nil {
		return nil, fmt.Errorf("the backup's state does not load: %w", err)
	}
	if got := st.Status(); got.StateDigest != br.Header.StateDigest || meta.Index != br.Header.AppliedIndex {
		return nil, fmt.Errorf("the restored state has digest %s at index %d; the backup names %s at %d",
			got.StateDigest, meta.Index, br.Header.StateDigest, br.Header.AppliedIndex)
	}
	return &client.BackupSummary{Header: br.Header, End: br.End}, nil
}
