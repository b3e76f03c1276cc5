package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/spf13/pflag"
)

func backupCommand() *command {
	return &command{
		name:    "backup",
		summary: "Back up the whole cluster: state and chunk bodies",
		subs:    []*command{backupSaveCommand()},
	}
}

func backupSaveCommand() *command {
	var showProgress bool
	return &command{
		name:    "save",
		summary: "Write a full, verified backup to a file",
		args:    "FILE",
		long: `Streams GET /v1/cluster/backup (admin): a consistent snapshot of the state
and the body of every chunk it holds. Every chunk is checked against its
digest as it arrives, and the state and the whole stream against the
backup's end frame. The backup goes to a temporary file beside FILE, which
replaces FILE only once all of it verified: FILE never holds a partial
backup. 'batond restore --from FILE' seeds a new cluster from it
(docs/operations.md "Backup and restore").

A progress bar goes to stderr when stderr is a terminal, or with --progress.`,
		examples: `  baton backup save /backups/baton-$(date +%F).backup`,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&showProgress, "progress", false, "draw the progress bar on stderr even when it is not a terminal")
		},
		run: func(ctx context.Context, a *app, inv *invocation) error {
			var file string
			if err := inv.check([]arg{{"FILE", &file}}); err != nil {
				return err
			}
			return a.backupSave(ctx, file, showProgress)
		},
	}
}

func (a *app) backupSave(ctx context.Context, file string, showProgress bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	var bar *progress
	if showProgress || isTerminal(a.stderr) {
		bar = &progress{w: a.stderr, label: "backup", total: -1, start: time.Now(), now: time.Now}
	}
	start := time.Now()
	var stateEnd int64 // bytes received when the state ended
	sum, err := c.BackupTo(ctx, file, func(p client.BackupProgress) {
		total := int64(-1)
		if p.StateDone {
			if stateEnd == 0 {
				stateEnd = p.Bytes
			}
			// The rest is the chunks: each a 37-byte frame head and body.
			total = stateEnd + p.Header.ChunkBytes + 37*p.Header.Chunks
		}
		bar.update(p.Bytes, total)
	})
	if bar != nil {
		bar.finish()
	}
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	h := sum.Header
	return a.emit(map[string]any{"file": file, "bytes": sum.Bytes, "applied_index": h.AppliedIndex,
		"state_digest": h.StateDigest, "state_bytes": sum.End.StateBytes, "chunks": h.Chunks, "chunk_bytes": h.ChunkBytes,
		"sha256": sum.End.SHA256, "node_id": h.NodeID, "elapsed_ms": elapsed.Milliseconds()}, func(w io.Writer) {
		fmt.Fprintf(w, "wrote %s: %s, state %s at index %d, %d chunks (%s), verified, in %s\n", file, sizeText(sum.Bytes),
			h.StateDigest, h.AppliedIndex, h.Chunks, sizeText(h.ChunkBytes), elapsed.Round(time.Millisecond))
	})
}
