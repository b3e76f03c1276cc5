package server

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/chunkstore"
)

// TestBackupHoldsStateAndChunks reads a full backup back with the client's
// reader: the header's digest is the cluster's, the state restores to it,
// and every chunk the state holds comes with its body, even one the
// answering node lost (fetched from a peer).
func TestBackupHoldsStateAndChunks(t *testing.T) {
	c := newCluster(t, 3)
	l := c.WaitForLeader(t)
	if st, _, body := c.do(t, l, "PUT", "/v1/tenants/acme", nil, adminAuth()); st != 201 {
		t.Fatalf("PUT tenant: %d %s", st, body)
	}
	bodies := map[string][]byte{}
	for _, s := range []string{"first body", "second body, a little longer"} {
		b := bytes.Repeat([]byte(s), 1000)
		d := chunkstore.Digest(b)
		bodies[d] = b
		if st, _, body := c.do(t, l, "PUT", "/v1/tenants/acme/chunks/"+d, b, adminAuth()); st != 201 {
			t.Fatalf("PUT chunk: %d %s", st, body)
		}
	}
	// The leader loses one body: the backup fetches it from a peer.
	var lost string
	for d := range bodies {
		lost = d
		break
	}
	if err := c.nodes[l].chunks.Remove(lost); err != nil {
		t.Fatal(err)
	}
	want := c.WaitConverged(t)

	st, hdr, raw := c.do(t, l, "GET", "/v1/cluster/backup", nil, adminAuth())
	if st != 200 {
		t.Fatalf("GET backup: %d %s", st, raw)
	}
	if hdr.Get("X-Baton-Index") == "" {
		t.Error("no X-Baton-Index on the backup")
	}
	br, err := client.NewBackupReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if br.Header.StateDigest != want.StateDigest || br.Header.AppliedIndex != want.AppliedIndex {
		t.Errorf("header: digest %s at %d, the cluster has %s at %d", br.Header.StateDigest, br.Header.AppliedIndex, want.StateDigest, want.AppliedIndex)
	}
	state, err := io.ReadAll(br.State())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for {
		d, b, err := br.NextChunk()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[d] = b
	}
	for d, b := range bodies {
		if !bytes.Equal(got[d], b) {
			t.Errorf("chunk %s: %d bytes in the backup, want %d", d, len(got[d]), len(b))
		}
	}
	if int64(len(got)) != br.Header.Chunks {
		t.Errorf("%d chunks read, header says %d", len(got), br.Header.Chunks)
	}
	f := fsm.New()
	if err := f.Restore(io.NopCloser(bytes.NewReader(state))); err != nil {
		t.Fatal(err)
	}
	if d := f.Status().StateDigest; d != want.StateDigest {
		t.Errorf("restored state digest %s, want %s", d, want.StateDigest)
	}

	// A flipped byte anywhere is caught.
	bad := bytes.Clone(raw)
	bad[len(bad)/2] ^= 1
	if _, err := client.VerifyBackup(bytes.NewReader(bad)); err == nil {
		t.Error("a corrupted backup verified")
	}
	if _, err := client.VerifyBackup(bytes.NewReader(raw[:len(raw)-10])); !errors.Is(err, client.ErrBadBackup) {
		t.Errorf("a truncated backup: %v, want ErrBadBackup", err)
	}
}

// TestBackupFailsLoudlyWithoutABody: when no member has a body the state
// holds, the stream ends in an error frame, never in an end frame.
func TestBackupFailsLoudlyWithoutABody(t *testing.T) {
	c := newCluster(t, 1)
	if st, _, body := c.do(t, 0, "PUT", "/v1/tenants/acme", nil, adminAuth()); st != 201 {
		t.Fatalf("PUT tenant: %d %s", st, body)
	}
	b := []byte("a body that will be lost")
	d := chunkstore.Digest(b)
	if st, _, body := c.do(t, 0, "PUT", "/v1/tenants/acme/chunks/"+d, b, adminAuth()); st != 201 {
		t.Fatalf("PUT chunk: %d %s", st, body)
	}
	if err := c.nodes[0].chunks.Remove(d); err != nil {
		t.Fatal(err)
	}
	st, _, raw := c.do(t, 0, "GET", "/v1/cluster/backup", nil, adminAuth())
	if st != 200 {
		t.Fatalf("GET backup: %d %s", st, raw)
	}
	_, err := client.VerifyBackup(bytes.NewReader(raw))
	if !errors.Is(err, client.ErrBadBackup) || !bytes.Contains([]byte(err.Error()), []byte(d)) {
		t.Fatalf("verify: %v, want ErrBadBackup naming %s", err, d)
	}
}
