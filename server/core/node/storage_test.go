package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// TestLogStoreFormats: a new data dir gets the WAL; a dir keeps the format
// it was created with; asking for the other one is an error, not an empty
// log; what was stored is there after a reopen in the same process.
func TestLogStoreFormats(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBolt} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			want := kind
			if kind == LogStoreWAL {
				want = "" // the default
			}
			st, got, err := openLogStore(dir, want)
			if err != nil {
				t.Fatal(err)
			}
			if got != kind {
				t.Fatalf("format: got %q, want %q", got, kind)
			}
			if err := st.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("a")}, {Index: 2, Term: 1, Data: []byte("b")}}); err != nil {
				t.Fatal(err)
			}
			if err := st.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}

			other := LogStoreBolt
			if kind == LogStoreBolt {
				other = LogStoreWAL
			}
			if _, _, err := openLogStore(dir, other); err == nil || !strings.Contains(err.Error(), "--raft-log "+kind) {
				t.Fatalf("open as %s: got %v, want an error naming --raft-log %s", other, err, kind)
			}

			st, got, err = openLogStore(dir, "") // reopening must not wait on a lock
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if got != kind {
				t.Fatalf("reopened format: got %q, want %q", got, kind)
			}
			var l raft.Log
			if err := st.GetLog(2, &l); err != nil || string(l.Data) != "b" {
				t.Fatalf("GetLog(2) after reopen: %v %q, want b", err, l.Data)
			}
			if term, err := st.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
				t.Fatalf("CurrentTerm after reopen: %d %v, want 7", term, err)
			}
			// Compaction: an entry below the first index is gone.
			if err := st.DeleteRange(1, 1); err != nil {
				t.Fatal(err)
			}
			if first, err := st.FirstIndex(); err != nil || first != 2 {
				t.Fatalf("FirstIndex after compaction: %d %v, want 2", first, err)
			}
			if err := st.GetLog(1, &l); err != raft.ErrLogNotFound {
				t.Fatalf("GetLog(1) after compaction: got %v, want ErrLogNotFound", err)
			}
		})
	}
	t.Run("both", func(t *testing.T) {
		dir := t.TempDir()
		_ = os.WriteFile(filepath.Join(dir, "raft.db"), nil, 0o644)
		_ = os.Mkdir(filepath.Join(dir, "wal"), 0o755)
		if _, _, err := openLogStore(dir, ""); err == nil {
			t.Fatal("a dir with both raft.db and wal/ opened without error")
		}
	})
}
