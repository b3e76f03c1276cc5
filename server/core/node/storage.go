package node

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"go.etcd.io/bbolt"
)

// The Raft log formats a data directory can hold.
const (
	// LogStoreWAL is hashicorp/raft-wal: append-only, preallocated segment
	// files under DataDir/wal. An append is one write and one fsync.
	LogStoreWAL = "wal"
	// LogStoreBolt is raft-boltdb v2: one bbolt file, DataDir/raft.db. An
	// append is a bbolt commit: two fsyncs (pages, then the meta page).
	LogStoreBolt = "boltdb"
)

// logStore is what Raft needs from the log: the log itself and the small
// stable store (current term, vote) beside it.
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// existingLogStore reports which format dir already holds, or "".
func existingLogStore(dir string) (string, error) {
	var found []string
	if _, err := os.Stat(filepath.Join(dir, "raft.db")); err == nil {
		found = append(found, LogStoreBolt)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "wal")); err == nil {
		found = append(found, LogStoreWAL)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("node: %s holds both raft.db and wal/; keep the one this node last used", dir)
}

// openLogStore opens (or creates) the Raft log of dir in the configured
// format. A directory keeps the format it was created with: asking for the
// other one is an error rather than a silently empty log.
func openLogStore(dir, want string) (logStore, string, error) {
	have, err := existingLogStore(dir)
	if err != nil {
		return nil, "", err
	}
	kind := want
	switch {
	case have != "" && want != "" && have != want:
		return nil, "", fmt.Errorf("node: %s holds a %s Raft log, not %s; start with --raft-log %s", dir, have, want, have)
	case have != "":
		kind = have
	case want == "":
		kind = LogStoreWAL
	}
	switch kind {
	case LogStoreBolt:
		path := filepath.Join(dir, "raft.db")
		st, err := raftboltdb.New(raftboltdb.Options{
			Path:        path,
			BoltOptions: &bbolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true},
		})
		if err != nil {
			return nil, "", fmt.Errorf("node: open raft log %s: %w", path, err)
		}
		return st, kind, nil
	default:
		path := filepath.Join(dir, "wal")
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, "", err
		}
		st, err := wal.Open(path)
		if err != nil {
			return nil, "", fmt.Errorf("node: open raft log %s: %w", path, err)
		}
		return &walStore{WAL: st}, kind, nil
	}
}

// walStore hides entries below FirstIndex. raft-wal v0.4.2 compacts the
// head of the log logically (whole segment files are deleted later), and
// GetLog still returns a compacted entry while its segment is the tail;
// hashicorp/raft expects ErrLogNotFound there, and sends a follower that
// far behind a snapshot instead.
type walStore struct {
	*wal.WAL
}

func (s *walStore) GetLog(index uint64, l *raft.Log) error {
	first, err := s.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return s.WAL.GetLog(index, l)
}
