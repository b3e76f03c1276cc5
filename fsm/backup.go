package fsm

import "io"

// BackupView is a consistent point-in-time view of the state for a full
// backup: the state stream (the snapshot format Persist writes and Restore
// reads) and the chunks that state holds, both from the same clone, so a
// backup never names a chunk its state does not hold, or the reverse.
type BackupView struct {
	s *snapshot
}

// BackupView captures the current state in O(1) (copy-on-write).
func (f *FSM) BackupView() *BackupView {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &BackupView{s: &snapshot{st: f.st.clone(), applied: f.applied, clock: f.clock}}
}

// AppliedIndex is the log index the view was taken at.
func (v *BackupView) AppliedIndex() uint64 { return v.s.applied }

// StateDigest is the view's state digest, as Status reports it.
func (v *BackupView) StateDigest() string { return digestOf(v.s.st.sum, v.s.clock) }

// WriteState streams the view's state in the snapshot format to w.
func (v *BackupView) WriteState(w io.Writer) error { return v.s.write(w) }

// Chunks calls fn for every chunk some tenant holds in the view, in digest
// order, with its size, until fn returns an error, which it returns.
func (v *BackupView) Chunks(fn func(digest string, size int64) error) error {
	var err error
	v.s.st.Scan(chunkGlobalPrefix, "", func(k string, raw []byte) bool {
		var g chunkGlobal
		if decode(raw, &g) != nil {
			return true
		}
		err = fn(k[len(chunkGlobalPrefix):], g.Size)
		return err == nil
	})
	return err
}
