package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
)

// Black-box tests of chunks, artifacts and refs (docs/api.md "Chunks and
// artifacts", "Refs"; docs/design.md "Chunks beside the log") on real clusters.

const artTenant = "acme"

// artContent is n pseudo-random (incompressible) bytes from seed.
func artContent(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		u := rng.Uint64()
		for j := i; j < min(i+8, n); j++ {
			b[j] = byte(u)
			u >>= 8
		}
	}
	return b
}

// artSetup starts n nodes, waits until each knows every member's HTTP
// address and creates the tenant.
//
// The wait works around a server bug: a node that knows fewer peer
// addresses than a chunk copy needs (as every node does for a moment after
// start) holds a chunk upload until the request times out instead of
// answering 503 at once, which costs the client a whole attempt timeout.
func artSetup(t *testing.T, n int) (*cluster.Cluster, *client.Client, context.Context) {
	t.Helper()
	return artSetupWith(t, cluster.Config{Nodes: n})
}

func artSetupWith(t *testing.T, cfg cluster.Config) (*cluster.Cluster, *client.Client, context.Context) {
	t.Helper()
	c := startClusterWith(t, cfg)
	n := c.Size()
	var ids []string
	for i := range n {
		ids = append(ids, c.ID(i))
	}
	for i := range n {
		artWaitMembers(t, c, i, ids)
	}
	admin := adminClient(t, c)
	ctx := ctxFor(t, 60*time.Second)
	if _, err := admin.PutTenant(ctx, artTenant); err != nil {
		t.Fatal(err)
	}
	return c, admin, ctx
}

// artWait polls check every 50ms until it reports done, failing the test
// with the last reason after d.
func artWait(t *testing.T, d time.Duration, what string, check func() (done bool, why string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		done, why := check()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, d, why)
		}
		time.Sleep(50 * time.Millisecond) // poll interval; the deadline bounds the wait
	}
}

func artVersions(t *testing.T, ctx context.Context, cl *client.Client, name string) []client.Manifest {
	t.Helper()
	list, err := cl.ListVersions(ctx, artTenant, name)
	if err != nil {
		t.Fatalf("ListVersions(%s): %v", name, err)
	}
	return list
}

// TestArtifactHandoff: the owner of a task publishes its artifact under its
// fencing token and dies before recording it on the task. Once its lease
// runs out a new owner claims the task, finds the first owner's artifact
// through the task, and approves exactly that version in one transaction
// with the task's update. The stale owner can then neither publish nor
// move the ref, and no other version is ever referenced.
func TestArtifactHandoff(t *testing.T) {
	t.Parallel() // see doc.go: no timing asserted
	_, admin, ctx := artSetup(t, 3)
	const task, name, approved = "report-42", "report-42-draft", "report-42/approved"
	if _, err := admin.CreateTask(ctx, artTenant, client.CreateTaskRequest{TaskID: task, Queue: "research",
		Payload: json.RawMessage(`{"artifact_name": "` + name + `"}`)}); err != nil {
		t.Fatal(err)
	}
	a, err := admin.ClaimTask(ctx, artTenant, task, client.ClaimRequest{Owner: "worker-a", Lease: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	draft := artContent(1, 5<<20+777)
	var stats client.UploadStats
	mA, err := admin.UploadArtifact(ctx, artTenant, name, bytes.NewReader(draft), client.UploadOptions{
		MediaType: "text/markdown", TaskID: task, Fence: &client.Fence{TaskID: task, Token: a.FencingToken}, Stats: &stats})
	if err != nil {
		t.Fatalf("fenced publish by the owner: %v", err)
	}
	if mA.Version != 1 || mA.FencingToken != a.FencingToken || mA.TaskID != task || stats.Chunks < 3 {
		t.Fatalf("got version %d token %d task %q (%d chunks), want 1, %d, %s, several chunks",
			mA.Version, mA.FencingToken, mA.TaskID, stats.Chunks, a.FencingToken, task)
	}
	// worker-a dies here: the task never hears of mA.

	// worker-b takes over once the lease has run out.
	var b *client.Task
	artWait(t, 10*time.Second, "claim by worker-b", func() (bool, string) {
		b, err = admin.ClaimTask(ctx, artTenant, task, client.ClaimRequest{Owner: "worker-b", Lease: 30 * time.Second})
		if errors.Is(err, client.ErrLeaseHeld) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatalf("ClaimTask by worker-b: %v", err)
		}
		return true, ""
	})
	if b.FencingToken <= a.FencingToken || b.ArtifactID != "" {
		t.Fatalf("worker-b: token %d artifact %q, want a token > %d and no artifact", b.FencingToken, b.ArtifactID, a.FencingToken)
	}

	// It finds the draft through the task: the name in the payload, the
	// version that the task's own claim produced.
	var payload struct {
		ArtifactName string `json:"artifact_name"`
	}
	if err := json.Unmarshal(b.Payload, &payload); err != nil || payload.ArtifactName != name {
		t.Fatalf("payload %s: %v", b.Payload, err)
	}
	var found *client.Manifest
	for _, m := range artVersions(t, ctx, admin, payload.ArtifactName) {
		if m.TaskID == task && m.FencingToken == a.FencingToken {
			found = &m
		}
	}
	if found == nil || found.ArtifactID != mA.ArtifactID {
		t.Fatalf("worker-b found %+v, want the draft %s", found, mA.ArtifactID)
	}
	byID, err := admin.GetArtifactByID(ctx, artTenant, found.ArtifactID)
	if err != nil || byID.Version != 1 || byID.Digest != client.Digest(draft) {
		t.Fatalf("GetArtifactByID: got %+v, %v", byID, err)
	}

	// Approve it and finish the task, all or nothing.
	fenceB := &client.Fence{TaskID: task, Token: b.FencingToken}
	done, release := "approved", true
	results, err := admin.Txn(ctx, artTenant, []client.TxnOp{
		client.TxnUpdateTask(task, client.UpdateTaskRequest{FencingToken: &b.FencingToken, Status: &done,
			ArtifactID: &found.ArtifactID, Release: &release}),
		client.TxnSetRef(approved, client.SetRefRequest{ArtifactID: found.ArtifactID, ExpectAbsent: true, Fence: fenceB}),
	})
	if err != nil {
		t.Fatalf("handoff transaction: %v", err)
	}
	var ref client.Ref
	if err := json.Unmarshal(results[1], &ref); err != nil || ref.ArtifactID != mA.ArtifactID || ref.Version != 1 || ref.Revision != 1 {
		t.Fatalf("ref after the transaction: %s (%v), want version 1 of %s at revision 1", results[1], err, mA.ArtifactID)
	}

	// The stale owner is fenced everywhere, and nothing it tries is stored.
	fenceA := &client.Fence{TaskID: task, Token: a.FencingToken}
	_, err = admin.UploadArtifact(ctx, artTenant, name, bytes.NewReader(artContent(2, 2<<20)), client.UploadOptions{TaskID: task, Fence: fenceA})
	if !errors.Is(err, client.ErrFenced) {
		t.Errorf("stale publish of new content: got %v, want fenced", err)
	}
	_, err = admin.UploadArtifact(ctx, artTenant, name, bytes.NewReader(draft), client.UploadOptions{MediaType: "text/markdown", TaskID: task, Fence: fenceA})
	if !errors.Is(err, client.ErrFenced) {
		t.Errorf("stale retry of its own publish: got %v, want fenced", err)
	}
	if _, err := admin.SetRef(ctx, artTenant, approved, client.SetRefRequest{ArtifactID: mA.ArtifactID, Fence: fenceA}); !errors.Is(err, client.ErrFenced) {
		t.Errorf("stale ref move: got %v, want fenced", err)
	}
	versions := artVersions(t, ctx, admin, name)
	if len(versions) != 1 || versions[0].ArtifactID != mA.ArtifactID {
		t.Errorf("got %d versions, want only the draft", len(versions))
	}
	refs, err := admin.ListRefs(ctx, artTenant, "")
	if err != nil {
		t.Fatal(err)
	}
	// Revision 1: the ref was set once, to the draft, and never moved.
	if len(refs) != 1 || refs[0].Ref != approved || refs[0].ArtifactID != mA.ArtifactID || refs[0].Version != 1 || refs[0].Revision != 1 {
		t.Errorf("got refs %+v, want only %s -> version 1 of %s at revision 1", refs, approved, mA.ArtifactID)
	}
	final, err := admin.GetTask(ctx, artTenant, task)
	if err != nil || final.Status != done || final.ArtifactID != mA.ArtifactID || final.Owner != "" {
		t.Errorf("task after the handoff: %+v (%v)", final, err)
	}
	var got bytes.Buffer
	if _, err := admin.DownloadArtifact(ctx, artTenant, name, ref.Version, &got); err != nil || !bytes.Equal(got.Bytes(), draft) {
		t.Errorf("approved content: equal %v, err %v", bytes.Equal(got.Bytes(), draft), err)
	}
}

// TestArtifactRetries: a retried publish returns the same artifact_id and
// version with 200, whether it is a new request or a replay of the same
// Idempotency-Key; a retried ref move with the same expectation is a no-op.
func TestArtifactRetries(t *testing.T) {
	_, admin, ctx := artSetup(t, 3)
	const name, ref = "notes", "notes/latest"
	body := artContent(3, 3<<20)
	opts := client.UploadOptions{MediaType: "text/plain", Sources: []string{"https://example.com/x"},
		Metadata: json.RawMessage(`{"b": 2, "a": 1}`)}
	var m1 client.Meta
	v1, err := admin.UploadArtifact(ctx, artTenant, name, bytes.NewReader(body), opts, client.CaptureMeta(&m1))
	if err != nil || m1.Status != 201 || v1.Version != 1 {
		t.Fatalf("first publish: status %d version %+v, err %v; want 201 and version 1", m1.Status, v1, err)
	}

	// The same upload again: nothing sent, 200 with the same version.
	var m2 client.Meta
	var stats client.UploadStats
	opts.Metadata = json.RawMessage(`{"a":1,"b":2}`) // the same object, written otherwise
	opts.Stats = &stats
	v1b, err := admin.UploadArtifact(ctx, artTenant, name, bytes.NewReader(body), opts, client.CaptureMeta(&m2))
	if err != nil || m2.Status != 200 || v1b.ArtifactID != v1.ArtifactID || v1b.Version != 1 || stats.BytesSent != 0 {
		t.Fatalf("retried publish: status %d id %s version %d sent %d (err %v); want 200, %s, 1, 0",
			m2.Status, v1b.ArtifactID, v1b.Version, stats.BytesSent, err, v1.ArtifactID)
	}
	// A replay of one Idempotency-Key returns the first answer.
	req := client.PublishRequest{Chunks: v1.Chunks, Digest: v1.Digest, Size: v1.Size, MediaType: "text/plain",
		Sources: []string{"https://example.com/x"}, Metadata: json.RawMessage(`{"a":1,"b":2}`)}
	var r1, r2 client.Meta
	p1, err1 := admin.PublishArtifact(ctx, artTenant, name, req, client.IdempotencyKey("publish-notes-1"), client.CaptureMeta(&r1))
	p2, err2 := admin.PublishArtifact(ctx, artTenant, name, req, client.IdempotencyKey("publish-notes-1"), client.CaptureMeta(&r2))
	if err1 != nil || err2 != nil || p1.ArtifactID != v1.ArtifactID || p2.ArtifactID != v1.ArtifactID || !r2.Replay || r2.Index != r1.Index {
		t.Fatalf("keyed publish twice: %v %v, ids %s %s, replay %v, index %d %d", err1, err2, p1.ArtifactID, p2.ArtifactID, r2.Replay, r1.Index, r2.Index)
	}
	if got := artVersions(t, ctx, admin, name); len(got) != 1 {
		t.Fatalf("got %d versions after retries, want 1", len(got))
	}

	// Ref moves: the retried move is a no-op at the same revision.
	first, err := admin.SetRef(ctx, artTenant, ref, client.SetRefRequest{ArtifactID: v1.ArtifactID, ExpectAbsent: true})
	if err != nil || first.Revision != 1 {
		t.Fatalf("SetRef: %+v, %v", first, err)
	}
	again, err := admin.SetRef(ctx, artTenant, ref, client.SetRefRequest{ArtifactID: v1.ArtifactID, ExpectAbsent: true})
	if err != nil || again.Revision != 1 || !again.UpdatedAt.Equal(first.UpdatedAt) {
		t.Fatalf("retried SetRef: %+v, %v; want revision 1 unchanged", again, err)
	}
	v2, err := admin.UploadArtifact(ctx, artTenant, name, bytes.NewReader(artContent(4, 1<<20)), client.UploadOptions{})
	if err != nil || v2.Version != 2 {
		t.Fatalf("second version: %+v, %v", v2, err)
	}
	moved, err := admin.SetRef(ctx, artTenant, ref, client.SetRefRequest{ArtifactID: v2.ArtifactID, Expect: v1.ArtifactID})
	if err != nil || moved.Revision != 2 || moved.Version != 2 {
		t.Fatalf("move to v2: %+v, %v", moved, err)
	}
	movedAgain, err := admin.SetRef(ctx, artTenant, ref, client.SetRefRequest{ArtifactID: v2.ArtifactID, Expect: v1.ArtifactID})
	if err != nil || movedAgain.Revision != 2 {
		t.Fatalf("retried move to v2: %+v, %v; want revision 2", movedAgain, err)
	}
	// A stale expectation that would move it elsewhere is refused with the
	// current value.
	_, err = admin.SetRef(ctx, artTenant, ref, client.SetRefRequest{ArtifactID: v1.ArtifactID, ExpectAbsent: true})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrVersionMismatch) {
		t.Fatalf("move with a stale expectation: got %v, want version_mismatch", err)
	}
	if cur, _ := apiErr.DetailString("artifact_id"); cur != v2.ArtifactID {
		t.Errorf("version_mismatch names %q, want %s", cur, v2.ArtifactID)
	}
}

// artChunkFiles lists the chunk bodies on node i's disk.
func artChunkFiles(c *cluster.Cluster, i int) map[string]bool {
	have := map[string]bool{}
	root := filepath.Join(c.DataDir(i), "chunks")
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && len(d.Name()) == 64 {
			have["sha256:"+d.Name()] = true
		}
		return nil
	})
	return have
}

// artCatchUp bounds a node's catch-up of artifact content: repair (a pass
// every 2 s that fetches what the node lacks) and a read of the content. A
// liveness bound, not a timing: on an idle machine both take about 2 s for
// 7 MB, under load several times that.
const artCatchUp = 60 * time.Second

// artWaitHolds waits until node i has every chunk of m on its own disk.
func artWaitHolds(t *testing.T, c *cluster.Cluster, i int, m *client.Manifest) {
	t.Helper()
	artWait(t, artCatchUp, fmt.Sprintf("%s holding every chunk body", c.ID(i)), func() (bool, string) {
		have := artChunkFiles(c, i)
		var lack []string
		for _, ch := range m.Chunks {
			if !have[ch.Digest] {
				lack = append(lack, ch.Digest[:15])
			}
		}
		return len(lack) == 0, fmt.Sprintf("lacks %d of %d: %v", len(lack), len(m.Chunks), lack)
	})
}

// artReadOn downloads m from node i alone, from its local state, and checks
// the bytes; it polls until the node has applied the manifest.
//
// An attempt is not cut by a deadline of its own: a download that makes
// progress runs to its end, and one that stalls fails by the SDK's idle
// timeout (no byte for Config.Timeout). A deadline per attempt (5 s, once)
// cut a 7 MB download on a loaded machine and started it again from the
// first byte, so that no attempt could finish: TestArtifactFollowerCatchUp
// failed so in a `make test`, while the node had caught up.
func artReadOn(t *testing.T, c *cluster.Cluster, i int, m *client.Manifest, want []byte) {
	t.Helper()
	cl := nodeClient(t, c, i, c.AdminToken())
	ctx := ctxFor(t, artCatchUp)
	artWait(t, artCatchUp, fmt.Sprintf("a stale read of the content on %s", c.ID(i)), func() (bool, string) {
		var got bytes.Buffer
		n, err := cl.DownloadArtifact(ctx, artTenant, m.Name, m.Version, &got, client.At(c.URL(i)), client.Stale())
		if errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrUnavailable) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatalf("download from %s: %v", c.ID(i), err)
		}
		if n != m.Size || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("download from %s: %d bytes, equal %v", c.ID(i), n, bytes.Equal(got.Bytes(), want))
		}
		return true, ""
	})
}

// artWaitMembers waits until node i lists exactly ids, each with an HTTP
// address.
func artWaitMembers(t *testing.T, c *cluster.Cluster, i int, ids []string) {
	t.Helper()
	artWait(t, 10*time.Second, fmt.Sprintf("%s listing members %v", c.ID(i), ids), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := c.Status(ctx, i)
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, m := range st.Members {
			if m.HTTPAddr != "" {
				got = append(got, m.ID)
			}
		}
		sort.Strings(got)
		return slices.Equal(got, ids), fmt.Sprintf("members %v", got)
	})
}

// TestArtifactFollowerCatchUp: a follower that was down while an artifact
// was uploaded fetches every body once restarted and serves the content
// from its own state; so does a member that joins afterwards.
func TestArtifactFollowerCatchUp(t *testing.T) {
	t.Parallel() // see doc.go: no timing asserted
	testArtifactFollowerCatchUp(t, false)
}

// testArtifactFollowerCatchUp is TestArtifactFollowerCatchUp, with TLS
// everywhere when tls is set: chunk copies, repair, forwarding and the
// join then go over mutual TLS between members.
func testArtifactFollowerCatchUp(t *testing.T, tls bool) {
	// Four nodes are started and n4 removed at once, so that it can join
	// later through --join (the harness starts every configured node).
	c, admin, ctx := artSetupWith(t, cluster.Config{Nodes: 4, TLS: tls})
	const n4 = 3
	if err := c.Kill(n4); err != nil {
		t.Fatal(err)
	}
	if err := admin.RemoveMember(ctx, c.ID(n4)); err != nil {
		t.Fatalf("RemoveMember(%s): %v", c.ID(n4), err)
	}
	three := []string{c.ID(0), c.ID(1), c.ID(2)}
	leader, err := c.WaitLeader(ctx, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	artWaitMembers(t, c, leader, three)
	follower := (leader + 1) % 3
	if err := c.Kill(follower); err != nil {
		t.Fatal(err)
	}

	data := artContent(5, 7<<20+5)
	var stats client.UploadStats
	m, err := admin.UploadArtifact(ctx, artTenant, "dataset", bytes.NewReader(data), client.UploadOptions{Stats: &stats})
	if err != nil {
		t.Fatalf("upload with %s down: %v", c.ID(follower), err)
	}
	if stats.ChunksUploaded != len(m.Chunks) || len(m.Chunks) < 4 {
		t.Fatalf("uploaded %d of %d chunks, want all of several", stats.ChunksUploaded, len(m.Chunks))
	}
	if have := artChunkFiles(c, follower); len(have) != 0 {
		t.Fatalf("%s holds %d bodies while down", c.ID(follower), len(have))
	}

	if err := c.Restart(ctx, follower); err != nil {
		t.Fatal(err)
	}
	artWaitHolds(t, c, follower, m) // by repair, before any read asks for them
	artReadOn(t, c, follower, m, data)

	if err := c.StartJoin(ctx, n4, c.URL(leader)); err != nil {
		t.Fatalf("StartJoin(%s): %v", c.ID(n4), err)
	}
	artWaitMembers(t, c, n4, append(three, c.ID(n4)))
	artWaitHolds(t, c, n4, m)
	artReadOn(t, c, n4, m, data)
	if _, err := c.WaitConverged(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestArtifactBadInput: every malformed chunk, manifest or ref is refused
// with its code, and nothing is stored.
func TestArtifactBadInput(t *testing.T) {
	_, admin, ctx := artSetup(t, 3)
	const name = "report"
	good := artContent(6, 200_000) // one chunk: under ChunkMinSize
	base, err := admin.UploadArtifact(ctx, artTenant, name, bytes.NewReader(good), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held := base.Chunks[0]

	// Chunks.
	other := artContent(7, 1000)
	_, err = admin.PutChunk(ctx, artTenant, client.Digest(other), append([]byte{1}, other...))
	checkAPIError(t, "chunk body not matching its digest", err, client.ErrDigestMismatch, 400)
	huge := artContent(8, 4<<20+1)
	_, err = admin.PutChunk(ctx, artTenant, client.Digest(huge), huge)
	checkAPIError(t, "chunk over 4 MiB", err, client.ErrTooLarge, 413)
	_, err = admin.PutChunk(ctx, artTenant, "sha256:ABC", other)
	checkAPIError(t, "malformed digest", err, client.ErrInvalidArgument, 400)
	missing, err := admin.MissingChunks(ctx, artTenant, []string{client.Digest(other), client.Digest(huge), held.Digest})
	if err != nil || len(missing) != 2 || slices.Contains(missing, held.Digest) {
		t.Errorf("MissingChunks after refused uploads: %v (%v), want the two refused ones", missing, err)
	}
	exact := artContent(9, 4<<20) // the limit itself is allowed
	if created, err := admin.PutChunk(ctx, artTenant, client.Digest(exact), exact); err != nil || !created {
		t.Errorf("chunk of exactly 4 MiB: created %v, %v", created, err)
	}

	// Manifests.
	absent := client.Digest([]byte("never uploaded"))
	cases := []struct {
		what   string
		req    client.PublishRequest
		want   error
		status int
	}{
		{"a missing chunk", client.PublishRequest{Chunks: []client.ChunkRef{held, {Digest: absent, Size: 14}},
			Digest: client.Digest(append(append([]byte(nil), good...), "never uploaded"...)), Size: held.Size + 14},
			client.ErrMissingChunks, 400},
		{"sizes not adding up", client.PublishRequest{Chunks: []client.ChunkRef{held}, Digest: base.Digest, Size: held.Size + 1},
			client.ErrInvalidArgument, 400},
		{"a chunk's size wrong", client.PublishRequest{Chunks: []client.ChunkRef{{Digest: held.Digest, Size: held.Size - 1}},
			Digest: base.Digest, Size: held.Size - 1}, client.ErrInvalidArgument, 400},
		{"a wrong digest", client.PublishRequest{Chunks: []client.ChunkRef{held}, Digest: client.Digest([]byte("x")), Size: held.Size},
			client.ErrDigestMismatch, 400},
		{"a malformed digest", client.PublishRequest{Chunks: []client.ChunkRef{held}, Digest: "md5:x", Size: held.Size},
			client.ErrInvalidArgument, 400},
		{"a chunk over 4 MiB", client.PublishRequest{Chunks: []client.ChunkRef{{Digest: held.Digest, Size: 4<<20 + 1}},
			Digest: base.Digest, Size: 4<<20 + 1}, client.ErrInvalidArgument, 400},
	}
	for _, tc := range cases {
		_, err := admin.PublishArtifact(ctx, artTenant, name, tc.req)
		checkAPIError(t, "manifest with "+tc.what, err, tc.want, tc.status)
		var e *client.Error
		if tc.want == client.ErrMissingChunks && errors.As(err, &e) {
			if got := fmt.Sprint(e.Details["missing"]); got != "["+absent+"]" {
				t.Errorf("missing_chunks details: got missing %s, want [%s]", got, absent)
			}
		}
	}
	if _, err := admin.UploadArtifact(ctx, artTenant, "bad name!", bytes.NewReader(good), client.UploadOptions{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("publish under a bad name: got %v, want invalid_argument", err)
	}

	// Refs.
	_, err = admin.SetRef(ctx, artTenant, "report/approved", client.SetRefRequest{ArtifactID: client.Digest([]byte("no such artifact"))})
	checkAPIError(t, "ref to an unknown artifact", err, client.ErrNotFound, 404)
	_, err = admin.SetRef(ctx, artTenant, "report/approved", client.SetRefRequest{ArtifactID: "not-a-digest"})
	checkAPIError(t, "ref to a malformed id", err, client.ErrInvalidArgument, 400)
	_, err = admin.SetRef(ctx, artTenant, "report/approved", client.SetRefRequest{ArtifactID: base.ArtifactID, Expect: absent})
	checkAPIError(t, "ref with a wrong expectation", err, client.ErrVersionMismatch, 409)
	if _, err := admin.GetRef(ctx, artTenant, "report/approved"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GetRef after refused moves: got %v, want not_found", err)
	}

	// Nothing was stored.
	versions := artVersions(t, ctx, admin, name)
	if len(versions) != 1 || versions[0].ArtifactID != base.ArtifactID {
		t.Errorf("got %d versions, want only the first", len(versions))
	}
	if refs, err := admin.ListRefs(ctx, artTenant, ""); err != nil || len(refs) != 0 {
		t.Errorf("got refs %v (%v), want none", refs, err)
	}
}

// checkAPIError checks err's code and HTTP status.
func checkAPIError(t *testing.T, what string, err error, want error, status int) {
	t.Helper()
	var e *client.Error
	if !errors.Is(err, want) || !errors.As(err, &e) || e.Status != status {
		t.Errorf("%s: got %v, want %d %v", what, err, status, want)
		return
	}
	if strings.TrimSpace(e.Message) == "" {
		t.Errorf("%s: %d %s without a message", what, e.Status, e.Code)
	}
}

// TestArtifactListDeleteGC: a principal lists only the names its grant
// reaches, page by page; a version a ref points at cannot be deleted until
// the ref moves; the chunk only the deleted version named is held for a
// fresh grace period and then collected by chunk GC (the tenant misses it
// again), while a chunk another version names stays; a whole name goes
// under its expect_version guard.
func TestArtifactListDeleteGC(t *testing.T) {
	c, admin, ctx := artSetupWith(t, cluster.Config{Nodes: 3, ExtraArgs: []string{"--chunk-gc-grace", "3s"}})
	publish := func(name string, seed uint64) *client.Manifest {
		t.Helper()
		m, err := admin.UploadArtifact(ctx, artTenant, name, bytes.NewReader(artContent(seed, 2000)), client.UploadOptions{})
		if err != nil {
			t.Fatalf("upload %s: %v", name, err)
		}
		return m
	}
	v1 := publish("team-a-1", 101)
	v2 := publish("team-a-1", 102)
	publish("team-a-2", 103)
	publish("team-b-1", 104)

	p, err := admin.CreatePrincipal(ctx, artTenant, "lister",
		[]client.Grant{{Resource: "artifacts", Prefix: "team-a", Actions: []string{"read"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	lister := nodeClient(t, c, 1, p.Token)
	var seen []string
	opts := client.ListArtifactsOptions{Limit: 1}
	for range 5 {
		page, err := lister.ListArtifacts(ctx, artTenant, opts)
		if err != nil {
			t.Fatalf("list as lister: %v", err)
		}
		for _, a := range page.Artifacts {
			seen = append(seen, fmt.Sprintf("%s %d/%d", a.Name, a.LatestVersion, a.Versions))
		}
		if opts.PageToken = page.NextPageToken; opts.PageToken == "" {
			break
		}
	}
	if want := []string{"team-a-1 2/2", "team-a-2 1/1"}; !slices.Equal(seen, want) {
		t.Errorf("lister's pages: %v, want %v", seen, want)
	}
	if _, err := lister.ListArtifacts(ctx, artTenant, client.ListArtifactsOptions{Prefix: "team-b"}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("list of team-b as lister: %v, want forbidden", err)
	}
	page, err := admin.ListArtifacts(ctx, artTenant, client.ListArtifactsOptions{Prefix: "team-"})
	if err != nil || len(page.Artifacts) != 3 {
		t.Errorf("admin list of team-: %+v %v, want three names", page, err)
	}

	// A ref holds version 1 until it moves.
	if _, err := admin.SetRef(ctx, artTenant, "team-a/approved", client.SetRefRequest{ArtifactID: v1.ArtifactID}); err != nil {
		t.Fatal(err)
	}
	err = admin.DeleteArtifactVersion(ctx, artTenant, "team-a-1", 1, "")
	var apiErr *client.Error
	if !errors.Is(err, client.ErrReferenced) || !errors.As(err, &apiErr) || !strings.Contains(fmt.Sprint(apiErr.Details["refs"]), "team-a/approved") {
		t.Fatalf("delete of a referenced version: %v, want referenced naming team-a/approved", err)
	}
	if _, err := admin.SetRef(ctx, artTenant, "team-a/approved", client.SetRefRequest{ArtifactID: v2.ArtifactID, Expect: v1.ArtifactID}); err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteArtifactVersion(ctx, artTenant, "team-a-1", 1, v1.ArtifactID); err != nil {
		t.Fatalf("delete after the ref moved: %v", err)
	}
	if list := artVersions(t, ctx, admin, "team-a-1"); len(list) != 1 || list[0].Version != 2 {
		t.Errorf("versions after the delete: %+v, want only 2", list)
	}

	// Chunk GC frees version 1's chunk a grace period after the delete.
	d1, d2 := v1.Chunks[0].Digest, v2.Chunks[0].Digest
	if missing, err := admin.MissingChunks(ctx, artTenant, []string{d1, d2}); err != nil || len(missing) != 0 {
		t.Errorf("right after the delete the tenant misses %v (%v), want nothing: the grace period starts at the delete", missing, err)
	}
	artWait(t, 30*time.Second, "chunk GC of the deleted version's chunk", func() (bool, string) {
		missing, err := admin.MissingChunks(ctx, artTenant, []string{d1, d2})
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(missing, []string{d1}), fmt.Sprintf("missing %v", missing)
	})
	if _, err := admin.GetChunk(ctx, artTenant, d1); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("GET of the collected chunk: %v, want not_found", err)
	}
	var out bytes.Buffer
	if _, err := admin.DownloadArtifact(ctx, artTenant, "team-a-1", 2, &out); err != nil || !bytes.Equal(out.Bytes(), artContent(102, 2000)) {
		t.Errorf("version 2 after GC: %v", err)
	}

	// A whole name goes under its guard.
	one, two := uint64(1), uint64(2)
	if err := admin.DeleteArtifact(ctx, artTenant, "team-a-1", &one); !errors.Is(err, client.ErrVersionMismatch) {
		t.Errorf("whole delete expecting version 1: %v, want version_mismatch", err)
	}
	if err := admin.DeleteArtifact(ctx, artTenant, "team-a-1", &two); !errors.Is(err, client.ErrReferenced) {
		t.Errorf("whole delete of a name a ref points into: %v, want referenced", err)
	}
	if err := admin.DeleteArtifact(ctx, artTenant, "team-b-1", nil); err != nil {
		t.Errorf("whole delete of team-b-1: %v", err)
	}
	if list := artVersions(t, ctx, admin, "team-b-1"); len(list) != 0 {
		t.Errorf("team-b-1 after its delete: %+v", list)
	}
}

// TestArtifactKeepLast: under a keep-last-2 policy each publish trims the
// name's older versions, except the one a ref points at; names outside the
// prefix keep every version.
func TestArtifactKeepLast(t *testing.T) {
	_, admin, ctx := artSetup(t, 3)
	if _, err := admin.SetArtifactPolicy(ctx, artTenant, client.ArtifactPolicy{Prefix: "run-", KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	var first *client.Manifest
	for i := range uint64(5) {
		m, err := admin.UploadArtifact(ctx, artTenant, "run-7", bytes.NewReader(artContent(200+i, 1500)), client.UploadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = m
			if _, err := admin.SetRef(ctx, artTenant, "run-7/baseline", client.SetRefRequest{ArtifactID: m.ArtifactID}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := admin.UploadArtifact(ctx, artTenant, "keep-7", bytes.NewReader(artContent(300+i, 1500)), client.UploadOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []uint64
	for _, m := range artVersions(t, ctx, admin, "run-7") {
		got = append(got, m.Version)
	}
	if !slices.Equal(got, []uint64{1, 4, 5}) {
		t.Errorf("run-7 versions under keep-last 2: %v, want [1 4 5] (1 is the baseline ref's)", got)
	}
	if m, err := admin.GetArtifactByID(ctx, artTenant, first.ArtifactID); err != nil || m.Version != 1 {
		t.Errorf("the baseline's version: %+v %v", m, err)
	}
	if n := len(artVersions(t, ctx, admin, "keep-7")); n != 5 {
		t.Errorf("keep-7, under no policy, has %d versions, want 5", n)
	}
	page, err := admin.ListArtifacts(ctx, artTenant, client.ListArtifactsOptions{Prefix: "run-"})
	if err != nil || len(page.Artifacts) != 1 || page.Artifacts[0] != (client.ArtifactSummary{Name: "run-7", LatestVersion: 5, Versions: 3}) {
		t.Errorf("list of run-: %+v %v", page, err)
	}
}
