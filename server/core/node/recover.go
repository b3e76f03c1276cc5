package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/baton-dev/baton/fsm"
	"github.com/hashicorp/raft"
)

// Offline operations on a data directory (`batond restore`, `batond
// recover`): the node must not be running.

// ErrNotEmpty is returned by Seed for a data directory that holds Raft state.
var ErrNotEmpty = errors.New("node: the data directory already holds Raft state")

// Seed makes dataDir the data directory of a member of a new cluster whose
// state is the snapshot stream read from state (the snapshot format, as a
// backup holds it) taken at log index. peers is the new cluster's
// configuration, written into the snapshot: every member seeded with the
// same state and peers starts from it with no bootstrap, and elects a
// leader among peers. It refuses a directory that holds Raft state.
func Seed(dataDir string, index uint64, peers []raft.Server, state io.Reader, log *slog.Logger) error {
	if index == 0 {
		return errors.New("node: a seed snapshot needs a log index above 0")
	}
	if err := checkConfiguration(peers); err != nil {
		return err
	}
	if have, err := existingLogStore(dataDir); err != nil {
		return err
	} else if have != "" {
		return fmt.Errorf("%w: %s holds a %s Raft log", ErrNotEmpty, dataDir, have)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, newHCLogger(log))
	if err != nil {
		return fmt.Errorf("node: open snapshot store: %w", err)
	}
	if list, err := snaps.List(); err != nil {
		return err
	} else if len(list) > 0 {
		return fmt.Errorf("%w: %s holds snapshot %s", ErrNotEmpty, dataDir, list[0].ID)
	}
	// Term 1: the new cluster's first leader is elected in term 1 or later,
	// and its entries follow the snapshot's.
	// The transport only encodes the legacy peer list of the snapshot's
	// metadata.
	_, trans := raft.NewInmemTransport(raft.ServerAddress("seed"))
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{Servers: peers}, index, trans)
	if err != nil {
		return fmt.Errorf("node: create snapshot: %w", err)
	}
	if _, err := io.Copy(sink, state); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("node: write snapshot: %w", err)
	}
	return sink.Close()
}

// OpenSnapshot opens the newest snapshot of dataDir (to verify what Seed
// wrote).
func OpenSnapshot(dataDir string, log *slog.Logger) (*raft.SnapshotMeta, io.ReadCloser, error) {
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, newHCLogger(log))
	if err != nil {
		return nil, nil, err
	}
	list, err := snaps.List()
	if err != nil {
		return nil, nil, err
	}
	if len(list) == 0 {
		return nil, nil, fmt.Errorf("node: %s holds no snapshot", dataDir)
	}
	return snaps.Open(list[0].ID)
}

// RecoverResult is what Recover found in the data directory.
type RecoverResult struct {
	LastIndex uint64 // the last log entry (or snapshot) applied into the new snapshot
	Status    fsm.Status
}

// Recover rewrites the Raft configuration of dataDir to peers, with
// hashicorp/raft's RecoverCluster: it restores the newest snapshot into f,
// applies every entry of the local log after it (committed or not), writes
// a new snapshot holding peers as the configuration and empties the log.
// The node then starts as a member of the cluster peers describes. id must
// be one of the peers.
func Recover(dataDir, id string, peers []raft.Server, f *fsm.FSM, log *slog.Logger) (*RecoverResult, error) {
	if err := checkConfiguration(peers); err != nil {
		return nil, err
	}
	found := false
	for _, p := range peers {
		found = found || string(p.ID) == id
	}
	if !found {
		return nil, fmt.Errorf("node: --peers does not list this node's id %q", id)
	}
	have, err := existingLogStore(dataDir)
	if err != nil {
		return nil, err
	}
	if have == "" {
		return nil, fmt.Errorf("node: %s holds no Raft log: nothing to recover", dataDir)
	}
	logs, _, err := openLogStore(dataDir, have)
	if err != nil {
		return nil, err
	}
	defer logs.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, newHCLogger(log))
	if err != nil {
		return nil, fmt.Errorf("node: open snapshot store: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(id)
	rc.Logger = newHCLogger(log)
	_, trans := raft.NewInmemTransport(raft.ServerAddress("recover"))
	if err := raft.RecoverCluster(rc, f, logs, logs, snaps, trans, raft.Configuration{Servers: peers}); err != nil {
		return nil, fmt.Errorf("node: recover: %w", err)
	}
	st := f.Status()
	return &RecoverResult{LastIndex: st.AppliedIndex, Status: st}, nil
}

func checkConfiguration(peers []raft.Server) error {
	if len(peers) == 0 {
		return errors.New("node: the new configuration lists no peers")
	}
	voters := 0
	for _, p := range peers {
		if p.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters == 0 {
		return errors.New("node: the new configuration has no voter")
	}
	return nil
}
