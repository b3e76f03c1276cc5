package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/zstd"
)

// Snapshot stream format, inside one zstd frame:
//
//	snapHeader, then Count x snapItem, then snapTrailer (the state digest).
//
// snapshotFormat2 is the same stream of a state that holds task records
// with a lifecycle part (lifecycleMarkerKey): a member that predates
// lifecycles refuses it instead of dropping the part. snapshotFormat3 is
// the same again for what came after (snapshotMarkers), and
// snapshotFormat4 for what came after format 3, snapshotFormat5 for what
// came after format 4. All are read.
const (
	snapshotFormat       = 1
	snapshotFormat2      = 2
	snapshotFormat3      = 3
	snapshotFormat4      = 4
	snapshotFormat5      = 5
	snapshotFormatLatest = snapshotFormat5
)

// snapshotMarkers: a state that holds a marker key is written in (at
// least) its format. A change to a record that an older member would read
// without error but wrongly (a field it would drop) puts a marker key the
// first time it writes such a record, and lists it here with the newest
// format, so that the older member refuses the snapshot instead.
var snapshotMarkers = []struct {
	key    string
	format int
}{
	{lifecycleMarkerKey, snapshotFormat2},
	{artifactPolicyMarkerKey, snapshotFormat3},
	{retentionMarkerKey, snapshotFormat3}, // a retention period anywhere (retention.go)
	{checkpointMarkerKey, snapshotFormat3},
	{checkpoints5MarkerKey, snapshotFormat4}, // pending writes by index, run ids (checkpoints.go)
	{claimedMarkerKey, snapshotFormat4},      // a task's ClaimedFrom (task.go)
	// A per-tenant session budget (limits.go).
	{sessionTenantMarkerKey, snapshotFormat4},
	{storeMarkerKey, snapshotFormat5},     // LangGraph store items (kvstore.go)
	{cancelMarkerKey, snapshotFormat5},    // a task's CancelRequested (cancel.go)
	{depsMarkerKey, snapshotFormat5},      // a task's Deps (deps.go)
	{waitpointMarkerKey, snapshotFormat5}, // a task's Waitpoint (waitpoints.go)
	{flowMarkerKey, snapshotFormat5},      // a queue policy's flow control, a task's ConcurrencyKey (flow.go)
	// Pending writes of bytes (checkpoints.go).
	{checkpoints6MarkerKey, snapshotFormat5},
}

// snapshotFormatOf is the format a snapshot of st is written in.
func snapshotFormatOf(st *Store) int {
	format := snapshotFormat
	for _, m := range snapshotMarkers {
		if m.format > format && st.Has(m.key) {
			format = m.format
		}
	}
	return format
}

type snapHeader struct {
	Format  int
	Applied uint64
	Clock   int64
	Count   int
}

type snapItem struct {
	K string
	V []byte
}

type snapTrailer struct {
	Digest string
}

type snapshot struct {
	st      *Store
	applied uint64
	clock   int64
}

// Persist streams the captured state to sink. It runs off the apply path.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	zw, err := zstd.NewWriter(bw, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	enc := codec.NewEncoder(zw, mh)
	hdr := snapHeader{Format: snapshotFormatOf(s.st), Applied: s.applied, Clock: s.clock, Count: s.st.Len()}
	if err := enc.Encode(&hdr); err != nil {
		return err
	}
	var werr error
	s.st.ascend(func(k string, v []byte) bool {
		werr = enc.Encode(&snapItem{K: k, V: v})
		return werr == nil
	})
	if werr != nil {
		return werr
	}
	if err := enc.Encode(&snapTrailer{Digest: digestOf(s.st.sum, s.clock)}); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// Release is a no-op: the clone is garbage collected.
func (s *snapshot) Release() {}

// Stream writes the snapshot stream (as Persist does) to w; used for backups.
func (s *snapshot) Stream(w io.Writer) error { return s.write(w) }

// ErrBadSnapshot is returned when a snapshot stream is corrupt.
var ErrBadSnapshot = errors.New("fsm: bad snapshot")

func readSnapshot(r io.Reader) (*Store, snapHeader, error) {
	var hdr snapHeader
	zr, err := zstd.NewReader(bufio.NewReaderSize(r, 1<<16), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, hdr, err
	}
	defer zr.Close()
	dec := codec.NewDecoder(zr, mh)
	if err := dec.Decode(&hdr); err != nil {
		return nil, hdr, fmt.Errorf("%w: header: %v", ErrBadSnapshot, err)
	}
	if hdr.Format < snapshotFormat || hdr.Format > snapshotFormatLatest || hdr.Count < 0 {
		return nil, hdr, fmt.Errorf("%w: format %d, count %d", ErrBadSnapshot, hdr.Format, hdr.Count)
	}
	st := newStore()
	prev := ""
	for i := 0; i < hdr.Count; i++ {
		var it snapItem
		if err := dec.Decode(&it); err != nil {
			return nil, hdr, fmt.Errorf("%w: item %d: %v", ErrBadSnapshot, i, err)
		}
		if i > 0 && it.K <= prev {
			return nil, hdr, fmt.Errorf("%w: keys out of order at %d", ErrBadSnapshot, i)
		}
		prev = it.K
		st.Put(it.K, it.V)
	}
	var tr snapTrailer
	if err := dec.Decode(&tr); err != nil {
		return nil, hdr, fmt.Errorf("%w: trailer: %v", ErrBadSnapshot, err)
	}
	if got := digestOf(st.sum, hdr.Clock); got != tr.Digest {
		return nil, hdr, fmt.Errorf("%w: digest %s, want %s", ErrBadSnapshot, got, tr.Digest)
	}
	return st, hdr, nil
}

// Backup writes a consistent snapshot of the current state to w, in the
// same format Persist writes and Restore reads.
func (f *FSM) Backup(w io.Writer) error {
	s, err := f.Snapshot()
	if err != nil {
		return err
	}
	return s.(*snapshot).Stream(w)
}
