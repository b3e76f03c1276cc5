package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/clustertest"
	"github.com/google/uuid"
)

// textContent is n bytes of deterministic, text-like data: lower-case
// "words" of pseudo-random letters between spaces and newlines.
func textContent(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		u := rng.Uint64()
		for j := i; j < min(i+8, n); j++ {
			switch c := byte(u); {
			case c < 32:
				b[j] = ' '
			case c < 34:
				b[j] = '\n'
			default:
				b[j] = 'a' + c%26
			}
			u >>= 8
		}
	}
	return b
}

func TestChunkerBounds(t *testing.T) {
	data := textContent(1, 24<<20)
	var sizes []int
	var joined bytes.Buffer
	if err := client.SplitChunks(bytes.NewReader(data), func(c []byte) error {
		sizes = append(sizes, len(c))
		joined.Write(c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(joined.Bytes(), data) {
		t.Fatal("chunks do not join up to the input")
	}
	for i, n := range sizes {
		if n > client.ChunkMaxSize || (n < client.ChunkMinSize && i != len(sizes)-1) {
			t.Errorf("chunk %d has %d bytes, want %d to %d", i, n, client.ChunkMinSize, client.ChunkMaxSize)
		}
	}
	avg := len(data) / len(sizes)
	if avg < client.ChunkAvgSize/2 || avg > 2*client.ChunkAvgSize {
		t.Errorf("got average chunk %d bytes over %d chunks, want about %d", avg, len(sizes), client.ChunkAvgSize)
	}
	t.Logf("%d chunks, average %d bytes", len(sizes), avg)

	// Empty and tiny inputs.
	for _, n := range []int{0, 1, client.ChunkMinSize, client.ChunkMinSize + 1} {
		var got []int
		_ = client.SplitChunks(bytes.NewReader(data[:n]), func(c []byte) error { got = append(got, len(c)); return nil })
		want := []int{n}
		if n == 0 {
			want = nil
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("input of %d bytes: got chunks %v, want %v", n, got, want)
		}
	}
}

// TestChunkerReadError: a read error is reported, never taken for the end.
func TestChunkerReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	r := io.MultiReader(bytes.NewReader(textContent(2, 6<<20)), iotestErrReader{boom})
	err := client.SplitChunks(r, func([]byte) error { return nil })
	if !errors.Is(err, boom) {
		t.Errorf("got %v, want %v", err, boom)
	}
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// fresh is a seed for textContent no earlier run used: the package's node
// keeps the chunks it was sent, and a test that uploads wants new ones
// (-count runs it again on the same node).
func fresh() uint64 { return rand.Uint64() }

// chunkPuts counts the chunk uploads among the requests a proxy saw.
func chunkPuts(p *clustertest.Proxy) int {
	n := 0
	for _, r := range p.Requests() {
		if r.Method == http.MethodPut && strings.Contains(r.Path, "/chunks/") {
			n++
		}
	}
	return n
}

// uniqueName is an artifact or queue name no other run of a test used:
// the package's node outlives a test, and -count runs it again.
func uniqueName(prefix string) string { return prefix + "-" + uuid.NewString()[:13] }

func TestUploadDownloadRoundTrip(t *testing.T) {
	// A node of its own: the figures below (chunks sent for an edit) hold
	// for this content, which a node that kept its chunks from an earlier
	// run would not ask for again.
	f := clustertest.NewProxy(t, clustertest.StartCluster(t, env, 1).URL(0), nil)
	// A roomy attempt timeout: it is also how long a download may go
	// without data, and a loaded machine under -race can pause that long.
	c := newClientCfg(t, client.Config{Endpoints: []string{f.URL}, Token: env.Token,
		Timeout: 30 * time.Second, MaxRetry: 30 * time.Second})
	name := uniqueName("report")
	task, err := c.CreateTask(bg, "acme", client.CreateTaskRequest{Queue: "artifacts"})
	if err != nil {
		t.Fatal(err)
	}
	taskID := task.TaskID
	data := textContent(3, 12<<20+12345)
	var stats client.UploadStats
	var last, calls atomic.Int64
	var monotonic atomic.Bool
	monotonic.Store(true)
	m, err := c.UploadArtifact(bg, "acme", name, bytes.NewReader(data), client.UploadOptions{
		MediaType: "text/plain", Sources: []string{"https://example.com/a"}, TaskID: taskID, Stats: &stats,
		Progress: func(done, total int64) {
			calls.Add(1)
			if done < last.Load() || total != int64(len(data)) {
				monotonic.Store(false)
			}
			last.Store(done)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 1 || m.Size != int64(len(data)) || m.Digest != client.Digest(data) || m.MediaType != "text/plain" || m.TaskID != taskID {
		t.Errorf("got manifest %+v", m)
	}
	if stats.Chunks != len(m.Chunks) || stats.ChunksUploaded != len(m.Chunks) || stats.BytesSent != int64(len(data)) || stats.Size != int64(len(data)) {
		t.Errorf("got stats %+v for %d chunks of %d bytes", stats, len(m.Chunks), len(data))
	}
	if len(m.Chunks) < 5 {
		t.Errorf("got %d chunks, want several", len(m.Chunks))
	}
	if !monotonic.Load() || last.Load() != int64(len(data)) || calls.Load() != int64(len(m.Chunks)) {
		t.Errorf("progress: %d calls ending at %d (monotonic %v), want %d calls ending at %d",
			calls.Load(), last.Load(), monotonic.Load(), len(m.Chunks), len(data))
	}

	var out bytes.Buffer
	n, err := c.DownloadArtifact(bg, "acme", name, 1, &out)
	if err != nil || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("download: got %d bytes, equal %v, err %v", n, bytes.Equal(out.Bytes(), data), err)
	}
	out.Reset()
	if _, err := c.DownloadArtifact(bg, "acme", name, 0, &out); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("download of the latest: equal %v, err %v", bytes.Equal(out.Bytes(), data), err)
	}

	// Unchanged content: nothing is sent, the same version comes back.
	puts := chunkPuts(f)
	var again client.UploadStats
	m2, err := c.UploadArtifact(bg, "acme", name, bytes.NewReader(data), client.UploadOptions{
		MediaType: "text/plain", Sources: []string{"https://example.com/a"}, TaskID: taskID, Stats: &again})
	if err != nil {
		t.Fatal(err)
	}
	if m2.ArtifactID != m.ArtifactID || m2.Version != 1 || chunkPuts(f) != puts || again.BytesSent != 0 || again.ChunksUploaded != 0 {
		t.Errorf("re-upload: got version %d id %s, %d new PUTs, stats %+v; want version 1, same id, nothing sent",
			m2.Version, m2.ArtifactID, chunkPuts(f)-puts, again)
	}

	// 1 MiB changed in the middle: a few chunks.
	edited := append([]byte(nil), data...)
	copy(edited[len(edited)/2:], textContent(99, 1<<20))
	var edit client.UploadStats
	m3, err := c.UploadArtifact(bg, "acme", name, bytes.NewReader(edited), client.UploadOptions{Stats: &edit})
	if err != nil {
		t.Fatal(err)
	}
	if m3.Version != 2 || edit.ChunksUploaded == 0 || edit.ChunksUploaded > 4 || edit.BytesSent > 8<<20 {
		t.Errorf("edited upload: got version %d, stats %+v; want version 2 and at most 4 chunks sent", m3.Version, edit)
	}
	t.Logf("edit of 1 MiB: sent %d of %d chunks, %d bytes", edit.ChunksUploaded, edit.Chunks, edit.BytesSent)
	out.Reset()
	if _, err := c.DownloadArtifact(bg, "acme", name, 2, &out); err != nil || !bytes.Equal(out.Bytes(), edited) {
		t.Fatalf("download of version 2: equal %v, err %v", bytes.Equal(out.Bytes(), edited), err)
	}
}

func TestUploadEmpty(t *testing.T) {
	c := newClient(t, env.URL())
	name := uniqueName("empty")
	m, err := c.UploadArtifact(bg, "acme", name, strings.NewReader(""), client.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Size != 0 || len(m.Chunks) != 0 || m.Digest != client.Digest(nil) {
		t.Errorf("got %+v, want an empty manifest", m)
	}
	var out bytes.Buffer
	if n, err := c.DownloadArtifact(bg, "acme", name, 1, &out); err != nil || n != 0 {
		t.Errorf("download: got %d bytes, err %v", n, err)
	}
}

// TestUploadBoundedMemory: with every chunk upload held up, the upload
// stops reading after a bounded number of chunks, and never sends more
// than Parallel at once.
func TestUploadBoundedMemory(t *testing.T) {
	// The proxy holds every chunk upload at the gate, and counts those
	// it holds, before it lets them on to the node.
	gate := make(chan struct{})
	var inFlight, maxInFlight atomic.Int64
	f := proxy(t, func(_ int, r *http.Request) clustertest.Hop {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/chunks/") {
			n := inFlight.Add(1)
			for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
			}
			select {
			case <-gate:
			case <-r.Context().Done():
			}
			inFlight.Add(-1)
		}
		return clustertest.Hop{}
	})
	// Roomy limits: what this test measures is memory, and a loaded
	// machine under -race can take longer than newClient's 5 s of retries.
	c := newClientCfg(t, client.Config{Endpoints: []string{f.URL}, Token: env.Token,
		Timeout: 30 * time.Second, MaxRetry: time.Minute})
	const parallel = 3
	src := &countingReader{r: bytes.NewReader(textContent(fresh(), 48<<20))}
	done := make(chan error, 1)
	go func() {
		_, err := c.UploadArtifact(bg, "acme", uniqueName("big"), src, client.UploadOptions{Parallel: parallel})
		done <- err
	}()
	// Wait until the reader has stopped advancing with every upload slot busy.
	deadline := time.Now().Add(10 * time.Second)
	var prev int64 = -1
	for stable := 0; stable < 10; {
		if time.Now().After(deadline) {
			t.Fatal("the upload did not settle")
		}
		time.Sleep(20 * time.Millisecond) // polling interval, bounded by deadline
		n := src.n.Load()
		if n == prev && inFlight.Load() == parallel {
			stable++
		} else {
			stable = 0
		}
		prev = n
	}
	// Bodies: Parallel uploading + 4 spare, plus the chunker's scan buffer
	// and the chunk in hand.
	bound := int64(parallel+4+2) * client.ChunkMaxSize
	if n := src.n.Load(); n > bound {
		t.Errorf("read %d bytes ahead with uploads blocked, want at most %d", n, bound)
	}
	t.Logf("read %d bytes (%d MiB) ahead of blocked uploads", src.n.Load(), src.n.Load()>>20)
	close(gate) // let everything through
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := maxInFlight.Load(); got > parallel {
		t.Errorf("got %d uploads in flight at once, want at most %d", got, parallel)
	}
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestUploadIdempotencyKeys: a key carried by the context goes to the
// publish only; every chunk upload has a key of its own.
func TestUploadIdempotencyKeys(t *testing.T) {
	f := proxy(t, nil)
	c := newClient(t, f.URL)
	publishKey := "publish-once-" + uuid.NewString() // the node keeps keys: one per run
	ctx := client.WithIdempotencyKey(bg, publishKey)
	if _, err := c.UploadArtifact(ctx, "acme", uniqueName("k"), bytes.NewReader(textContent(fresh(), 5<<20)), client.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var keys []string // of the chunk uploads and the publish, in order
	for _, r := range f.Requests() {
		if r.Method == http.MethodPut || strings.HasSuffix(r.Path, "/versions") {
			keys = append(keys, r.Key)
		}
	}
	for i, k := range keys {
		last := i == len(keys)-1
		switch {
		case last && k != publishKey:
			t.Errorf("publish key %q, want %q", k, publishKey)
		case !last && (k == "" || k == publishKey || seen[k]):
			t.Errorf("chunk upload %d has key %q, want a fresh one", i, k)
		}
		seen[k] = true
	}
}

// TestUploadFailureStops: a chunk upload refused (403: the principal may
// read artifacts, not write them) stops the upload: no publish, and only
// the uploads already under way are sent.
func TestUploadFailureStops(t *testing.T) {
	reader, err := nodeClient(t).CreatePrincipal(bg, "acme", uniqueName("reader"),
		[]client.Grant{{Resource: "artifacts", Actions: []string{"read"}}})
	if err != nil {
		t.Fatal(err)
	}
	f := proxy(t, nil)
	c := newClientCfg(t, client.Config{Endpoints: []string{f.URL}, Token: reader.Token, NoSession: true,
		Timeout: 10 * time.Second, MaxRetry: 5 * time.Second})
	_, err = c.UploadArtifact(bg, "acme", uniqueName("x"), bytes.NewReader(textContent(fresh(), 20<<20)), client.UploadOptions{})
	if !errors.Is(err, client.ErrForbidden) {
		t.Errorf("got %v, want forbidden", err)
	}
	publishes := 0
	for _, r := range f.Requests() {
		if strings.HasSuffix(r.Path, "/versions") {
			publishes++
		}
	}
	if puts := chunkPuts(f); publishes != 0 || puts > 10 {
		t.Errorf("got %d publishes and %d chunk uploads after the first failure, want 0 and a few", publishes, puts)
	}
}

func TestDownloadVerifies(t *testing.T) {
	for _, tc := range []struct {
		name        string
		corrupt     bool
		truncate    bool
		unavailable bool
	}{
		{"corrupt", true, false, false},
		{"truncated", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The proxy corrupts or cuts the node's answers on the way
			// while faulty is set.
			var faulty atomic.Bool
			f := proxy(t, func(_ int, r *http.Request) clustertest.Hop {
				if !faulty.Load() || !strings.HasSuffix(r.URL.Path, "/content") {
					return clustertest.Hop{}
				}
				if tc.corrupt {
					return clustertest.Hop{Fault: clustertest.Corrupt}
				}
				return clustertest.Hop{Fault: clustertest.Truncate}
			})
			c := newClient(t, f.URL)
			name := uniqueName("a")
			data := textContent(fresh(), 6<<20)
			if _, err := c.UploadArtifact(bg, "acme", name, bytes.NewReader(data), client.UploadOptions{}); err != nil {
				t.Fatal(err)
			}
			faulty.Store(true)
			_, err := c.DownloadArtifact(bg, "acme", name, 1, io.Discard)
			if !errors.Is(err, client.ErrDigestMismatch) || errors.Is(err, client.ErrUnavailable) != tc.unavailable {
				t.Errorf("got %v, want digest_mismatch (unavailable too: %v)", err, tc.unavailable)
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "out.txt")
			_ = os.WriteFile(path, []byte("old"), 0o644)
			if _, err := c.DownloadArtifactTo(bg, "acme", name, 1, path); !errors.Is(err, client.ErrDigestMismatch) {
				t.Errorf("DownloadArtifactTo: got %v, want digest_mismatch", err)
			}
			entries, _ := os.ReadDir(dir)
			if got, _ := os.ReadFile(path); len(entries) != 1 || string(got) != "old" {
				t.Errorf("after a failed DownloadArtifactTo: %d files, %.40q in place; want only the old file", len(entries), got)
			}
			faulty.Store(false)
			if n, err := c.DownloadArtifactTo(bg, "acme", name, 1, path); err != nil || n != int64(len(data)) {
				t.Fatalf("DownloadArtifactTo: got %d, %v", n, err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
				t.Error("DownloadArtifactTo wrote other content")
			}
		})
	}
}

// TestDownloadFailover: a 503 before the content starts moves on to the
// next endpoint; an error answer is final.
func TestDownloadFailover(t *testing.T) {
	// busy is the node without a leader, which answers 503.
	c := newClient(t, env.Leaderless, clustertest.ClosedEndpoint(t), env.URL())
	name := uniqueName("a")
	data := textContent(fresh(), 3<<20)
	if _, err := c.UploadArtifact(bg, "acme", name, bytes.NewReader(data), client.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := c.DownloadArtifact(bg, "acme", name, 1, &out); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("got err %v, equal %v", err, bytes.Equal(out.Bytes(), data))
	}
	if _, err := c.DownloadArtifact(bg, "acme", name, 9, &out); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("missing version: got %v, want not_found", err)
	}
	// Pinned to a dead endpoint: one attempt, no failover.
	_, err := c.DownloadArtifact(bg, "acme", name, 1, io.Discard, client.At(clustertest.ClosedEndpoint(t)))
	if !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("pinned to a closed endpoint: got %v, want unavailable", err)
	}
}

// TestDownloadStall: a stream that stops sending fails after the
// per-attempt timeout instead of hanging.
func TestDownloadStall(t *testing.T) {
	var stall atomic.Bool
	f := proxy(t, func(_ int, r *http.Request) clustertest.Hop {
		if stall.Load() && strings.HasSuffix(r.URL.Path, "/content") {
			return clustertest.Hop{Fault: clustertest.StallBody}
		}
		return clustertest.Hop{}
	})
	c := newClientCfg(t, client.Config{Endpoints: []string{f.URL}, Token: env.Token,
		Timeout: 300 * time.Millisecond, MaxRetry: time.Second})
	name := uniqueName("a")
	if _, err := c.UploadArtifact(ctxTimeout(t, 30*time.Second), "acme", name, bytes.NewReader(textContent(fresh(), 1<<20)), client.UploadOptions{}); err != nil {
		t.Fatal(err)
	}
	stall.Store(true)
	before := f.Count()
	ctx := ctxTimeout(t, time.Minute)
	_, err := c.DownloadArtifact(ctx, "acme", name, 1, io.Discard)
	// The per-attempt timeout ended the stalled attempts, not the caller's
	// context, and the budget ended the retries.
	if err == nil || ctx.Err() != nil || f.Count() == before {
		t.Errorf("got %v (context: %v, %d requests), want an error from the attempts' timeout", err, ctx.Err(), f.Count()-before)
	}
}

func TestArtifactRequestShapes(t *testing.T) {
	fence := &client.Fence{TaskID: "t1", Token: 7}
	d := client.Digest([]byte("x"))
	cases := []struct {
		name                    string
		call                    func(c *client.Client) error
		method, path, query, in string
	}{
		{"MissingChunks", func(c *client.Client) error { _, err := c.MissingChunks(bg, "acme", []string{d}); return err },
			"POST", "/v1/tenants/acme/chunks/missing", "", `{"digests":["` + d + `"]}`},
		{"PutChunk", func(c *client.Client) error { _, err := c.PutChunk(bg, "acme", d, []byte("x")); return err },
			"PUT", "/v1/tenants/acme/chunks/" + d, "", `x`},
		{"PublishArtifact", func(c *client.Client) error {
			_, err := c.PublishArtifact(bg, "acme", "rep", client.PublishRequest{Chunks: []client.ChunkRef{{Digest: d, Size: 1}},
				Digest: d, Size: 1, TaskID: "t1", Fence: fence})
			return err
		}, "POST", "/v1/tenants/acme/artifacts/rep/versions", "",
			`{"chunks":[{"digest":"` + d + `","size":1}],"digest":"` + d + `","size":1,"task_id":"t1","fence":{"task_id":"t1","token":7}}`},
		{"PublishArtifact empty", func(c *client.Client) error {
			_, err := c.PublishArtifact(bg, "acme", "rep", client.PublishRequest{Digest: d})
			return err
		}, "POST", "/v1/tenants/acme/artifacts/rep/versions", "", `{"chunks":[],"digest":"` + d + `","size":0}`},
		{"GetManifest", func(c *client.Client) error { _, err := c.GetManifest(bg, "acme", "rep", 3); return err },
			"GET", "/v1/tenants/acme/artifacts/rep/versions/3", "", ``},
		{"ListVersions stale", func(c *client.Client) error { _, err := c.ListVersions(bg, "acme", "rep", client.Stale()); return err },
			"GET", "/v1/tenants/acme/artifacts/rep/versions", "consistency=stale", ``},
		{"GetArtifactByID", func(c *client.Client) error { _, err := c.GetArtifactByID(bg, "acme", d); return err },
			"GET", "/v1/tenants/acme/artifacts/by-id/" + d, "", ``},
		{"SetRef absent", func(c *client.Client) error {
			_, err := c.SetRef(bg, "acme", "report-42/approved", client.SetRefRequest{ArtifactID: d, ExpectAbsent: true})
			return err
		}, "PUT", "/v1/tenants/acme/refs/report-42/approved", "", `{"artifact_id":"` + d + `","expect_artifact_id":""}`},
		{"SetRef fenced", func(c *client.Client) error {
			_, err := c.SetRef(bg, "acme", "r", client.SetRefRequest{ArtifactID: d, Expect: d, Fence: fence})
			return err
		}, "PUT", "/v1/tenants/acme/refs/r", "", `{"artifact_id":"` + d + `","expect_artifact_id":"` + d + `","fence":{"task_id":"t1","token":7}}`},
		{"SetRef unconditional", func(c *client.Client) error {
			_, err := c.SetRef(bg, "acme", "r", client.SetRefRequest{ArtifactID: d})
			return err
		},
			"PUT", "/v1/tenants/acme/refs/r", "", `{"artifact_id":"` + d + `"}`},
		{"GetRef", func(c *client.Client) error { _, err := c.GetRef(bg, "acme", "a/b c"); return err },
			"GET", "/v1/tenants/acme/refs/a/b%20c", "", ``},
		{"ListRefs", func(c *client.Client) error { _, err := c.ListRefs(bg, "acme", "report-42/"); return err },
			"GET", "/v1/tenants/acme/refs", "prefix=report-42%2F", ``},
		{"DeleteRef", func(c *client.Client) error { return c.DeleteRef(bg, "acme", "r", d) },
			"DELETE", "/v1/tenants/acme/refs/r", "expect_artifact_id=sha256%3A" + d[7:], ``},
		{"DeleteRef unconditional", func(c *client.Client) error { return c.DeleteRef(bg, "acme", "r", "") },
			"DELETE", "/v1/tenants/acme/refs/r", "", ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// What is checked is the request the node got; its answer
			// (the task, fence or artifact named may not exist) is not.
			p := proxy(t, nil)
			c := newClient(t, p.URL)
			var e *client.Error
			if err := tc.call(c); err != nil && !errors.As(err, &e) {
				t.Fatal(err)
			}
			r := p.Requests()[0]
			if r.Method != tc.method || r.Path != tc.path || r.Query != tc.query {
				t.Errorf("got %s %s?%s, want %s %s?%s", r.Method, r.Path, r.Query, tc.method, tc.path, tc.query)
			}
			if string(r.Body) != tc.in {
				t.Errorf("got body %s\nwant      %s", r.Body, tc.in)
			}
		})
	}
}

func TestRefPathRefused(t *testing.T) {
	p := proxy(t, nil)
	c := newClient(t, p.URL)
	for _, ref := range []string{"", "a//b", "a/../b", "./a", "a/"} {
		if _, err := c.GetRef(bg, "acme", ref); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("GetRef(%q): got %v, want invalid_argument", ref, err)
		}
	}
	if n := p.Count(); n != 0 {
		t.Errorf("got %d requests, want 0", n)
	}
}

// TestSetRefContradictoryExpectation: expecting a ref both absent and at
// an artifact is refused before anything is sent, alone or in a Txn.
func TestSetRefContradictoryExpectation(t *testing.T) {
	p := proxy(t, nil)
	c := newClient(t, p.URL)
	req := client.SetRefRequest{ArtifactID: "sha256:a", ExpectAbsent: true, Expect: "sha256:b"}
	if _, err := c.SetRef(bg, "acme", "r", req); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("SetRef: got %v, want invalid_argument", err)
	}
	if _, err := c.Txn(bg, "acme", []client.TxnOp{client.TxnSetRef("r", req)}); err == nil || !strings.Contains(err.Error(), "both absent and at") {
		t.Errorf("Txn: got %v, want the contradiction named", err)
	}
	if n := p.Count(); n != 0 {
		t.Errorf("got %d requests, want 0", n)
	}
}

func TestRefDecodesAPIShape(t *testing.T) {
	var r client.Ref
	raw := `{"ref": "report-42/approved", "artifact_id": "sha256:ab", "name": "report-42-draft", "version": 3,
	 "revision": 2, "updated_at": "2025-01-02T03:04:05.678Z"}`
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatal(err)
	}
	if r.Ref != "report-42/approved" || r.Version != 3 || r.Revision != 2 || r.UpdatedAt.IsZero() {
		t.Errorf("got %+v", r)
	}
}

// TestArtifactNameChecked: a name outside the grammar of docs/api.md (such
// as one holding "/") fails with ErrInvalidArgument before any request.
func TestArtifactNameChecked(t *testing.T) {
	p := proxy(t, nil)
	c := newClient(t, p.URL)
	ctx := ctxTimeout(t, 10*time.Second)
	calls := map[string]func(name string) error{
		"UploadArtifact": func(n string) error {
			_, err := c.UploadArtifact(ctx, "acme", n, strings.NewReader("x"), client.UploadOptions{})
			return err
		},
		"PublishArtifact": func(n string) error { _, err := c.PublishArtifact(ctx, "acme", n, client.PublishRequest{}); return err },
		"GetManifest":     func(n string) error { _, err := c.GetManifest(ctx, "acme", n, 1); return err },
		"ListVersions":    func(n string) error { _, err := c.ListVersions(ctx, "acme", n); return err },
		"DownloadArtifact": func(n string) error {
			_, err := c.DownloadArtifact(ctx, "acme", n, 1, io.Discard)
			return err
		},
		"DeleteArtifactVersion": func(n string) error { return c.DeleteArtifactVersion(ctx, "acme", n, 1, "") },
		"DeleteArtifact":        func(n string) error { return c.DeleteArtifact(ctx, "acme", n, nil) },
	}
	for call, f := range calls {
		for _, name := range []string{"out/x", "-x", strings.Repeat("a", 129)} {
			if err := f(name); !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "[A-Za-z0-9][A-Za-z0-9._:-]{0,127}") {
				t.Errorf("%s(%.10q): got %v, want ErrInvalidArgument naming the grammar", call, name, err)
			}
		}
	}
	if n := p.Count(); n != 0 {
		t.Errorf("bad names sent %d requests, want 0", n)
	}
}
