package fsm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckpointWritesOfBytes: a pending write may be bytes of a
// serializer's type (LangGraph's (type, bytes)) instead of a JSON value:
// stored as given, read back with its type (b64 in JSON), replaced at a
// negative index like any write; it needs EntryVersion6 and makes the
// state's snapshots format 5.
func TestCheckpointWritesOfBytes(t *testing.T) {
	w := newWorld(t)
	w.ok(KindCheckpointPut, "acme", cpPut("th", "c1", "", `1`))
	json1 := &CheckpointWritesArgs{Thread: "th", ID: "c1", TaskID: "t0", Entries: []CheckpointWrite{{Channel: "a", Value: []byte(`1`)}}}
	if v := NewCommand(KindCheckpointWrites, 1, "acme", "", json1).ver; v != EntryVersion5 {
		t.Errorf("entry version of JSON writes: %d, want %d", v, EntryVersion5)
	}
	w.ok(KindCheckpointWrites, "acme", json1)
	if f := snapshotFormatOf(w.f.st); f != snapshotFormat4 {
		t.Errorf("snapshot format with JSON writes only: %d, want %d", f, snapshotFormat4)
	}
	raw := []byte{0x92, 0x00, 0xff, '"'} // not JSON, not UTF-8
	typed := &CheckpointWritesArgs{Thread: "th", ID: "c1", TaskID: "t1", TaskPath: "p", Entries: []CheckpointWrite{
		{Idx: 0, Channel: "m", Value: raw, Type: "msgpack"},
		{Idx: -3, Channel: "__interrupt__", Value: []byte{1}, Type: "msgpack"},
	}}
	c := NewCommand(KindCheckpointWrites, 1, "acme", "", typed)
	if c.ver != EntryVersion6 || EncodeEntry([]*Command{c})[0] != EntryVersion6 {
		t.Errorf("entry version of writes of bytes: %d, want %d", c.ver, EntryVersion6)
	}
	w.ok(KindCheckpointWrites, "acme", typed)
	replaced := &CheckpointWritesArgs{Thread: "th", ID: "c1", TaskID: "t1", TaskPath: "p", Entries: []CheckpointWrite{
		{Idx: -3, Channel: "__interrupt__", Value: []byte{2}, Type: "pickle"},
		{Idx: 0, Channel: "m", Value: []byte{9}, Type: "msgpack"}, // kept as first written
	}}
	if r := w.ok(KindCheckpointWrites, "acme", replaced); r.Outcome != OutcomeCreated {
		t.Errorf("replacing a special channel's bytes: outcome %d", r.Outcome)
	}
	v, _, _ := w.f.GetCheckpoint("acme", "th", "", "c1")
	if len(v.Pending) != 3 {
		t.Fatalf("pending: %+v", v.Pending)
	}
	if p := v.Pending[0]; p.Value == nil || p.Type != "" {
		t.Errorf("JSON write: %+v", p)
	}
	if p := v.Pending[1]; p.Type != "pickle" || !bytes.Equal(p.Bytes, []byte{2}) || p.Value != nil {
		t.Errorf("replaced write of bytes: %+v", p)
	}
	if p := v.Pending[2]; p.Type != "msgpack" || !bytes.Equal(p.Bytes, raw) || p.TaskPath != "p" {
		t.Errorf("write of bytes: %+v", p)
	}
	b, err := json.Marshal(v)
	if err != nil || !strings.Contains(string(b), `{"task_id":"t1","task_path":"p","idx":0,"channel":"m","type":"msgpack","b64":"kgD/Ig=="}`) {
		t.Errorf("JSON of the checkpoint: %s %v", b, err)
	}
	if f := snapshotFormatOf(w.f.st); f != snapshotFormat5 {
		t.Errorf("snapshot format with writes of bytes: %d, want %d", f, snapshotFormat5)
	}
	// Bytes are not checked as JSON (a JSON write still is).
	bad := &CheckpointWritesArgs{Thread: "th", ID: "c1", TaskID: "t2", Entries: []CheckpointWrite{{Channel: "a", Value: []byte(`{`)}}}
	if r := w.do(KindCheckpointWrites, "acme", bad); r.OK() {
		t.Errorf("a JSON write that is not JSON was recorded")
	}
}
