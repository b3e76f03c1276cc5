package client_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/baton-dev/baton/client"
)

// TestCheckpointWritesOfBytes: a pending write may be bytes of a
// serializer's type (as the Python saver writes them) instead of a JSON
// value; the Go SDK writes and reads both, against a real batond.
func TestCheckpointWritesOfBytes(t *testing.T) {
	c := newClient(t, env.URL())
	thread := putCheckpoints(t, c, "cp-1")
	raw := []byte{0x92, 0x00, 0xff}
	if err := c.PutWrites(bg, "acme", thread, "cp-1", client.PutWritesRequest{TaskID: "t", Writes: []client.Write{
		{Channel: "m", Type: "msgpack", Data: raw}, {Channel: "n", Value: json.RawMessage(`null`)}}}); err != nil {
		t.Fatal(err)
	}
	cp, err := c.LatestCheckpoint(bg, "acme", thread)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.PendingWrites) != 2 {
		t.Fatalf("pending writes: %+v", cp.PendingWrites)
	}
	if w := cp.PendingWrites[0]; w.Channel != "m" || w.Type != "msgpack" || !bytes.Equal(w.Data, raw) || w.Value != nil {
		t.Errorf("write of bytes: %+v", w)
	}
	if w := cp.PendingWrites[1]; w.Channel != "n" || string(w.Value) != "null" || w.Type != "" {
		t.Errorf("JSON write of null: %+v", w)
	}
}
