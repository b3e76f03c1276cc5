package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/client/internal/backoff"
	"github.com/baton-dev/baton/client/internal/transport"
	"github.com/baton-dev/baton/fsm/wire"
)

// Artifacts are immutable, versioned blobs (docs/api.md "Chunks and artifacts").
// Their content is cut into chunks that are uploaded beside the Raft log;
// a version is a manifest naming the chunks in order.

// ChunkRef is one chunk of an artifact's content, in order.
type ChunkRef = wire.ChunkRef

// Manifest is a published artifact version. It never changes.
type Manifest struct {
	ArtifactID   string          `json:"artifact_id"` // digest of the canonical manifest, computed by the server
	Name         string          `json:"name"`
	Version      uint64          `json:"version"`
	Digest       string          `json:"digest"` // of the whole content
	Size         int64           `json:"size"`
	Chunks       []ChunkRef      `json:"chunks"`
	MediaType    string          `json:"media_type"`
	Sources      []string        `json:"sources"`
	Metadata     json.RawMessage `json:"metadata"`
	TaskID       string          `json:"task_id"`
	FencingToken uint64          `json:"fencing_token"`
	CreatedBy    string          `json:"created_by"`
	CreatedAt    time.Time       `json:"created_at"`
}

// PublishRequest is the body of PublishArtifact. The server checks that the
// tenant holds every chunk (ErrMissingChunks), that the sizes add up to
// Size and that the chunks' bytes hash to Digest (ErrDigestMismatch).
type PublishRequest struct {
	Chunks    []ChunkRef      `json:"chunks"`
	Digest    string          `json:"digest"`
	Size      int64           `json:"size"`
	MediaType string          `json:"media_type,omitempty"`
	Sources   []string        `json:"sources,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	TaskID    string          `json:"task_id,omitempty"`
	Fence     *Fence          `json:"fence,omitempty"`
}

// UploadOptions are the optional parts of UploadArtifact.
type UploadOptions struct {
	MediaType string
	Sources   []string
	Metadata  json.RawMessage // a JSON object
	TaskID    string          // the task that produced the artifact
	// Fence makes the publish apply only while its token is the task's
	// current one (ErrFenced otherwise, and no version is made). Chunks are
	// uploaded regardless: they are invisible until a manifest names them.
	Fence *Fence
	// Parallel is the number of chunk uploads in flight (default 4). The
	// upload holds at most Parallel+4 chunk bodies in memory (each at most
	// ChunkMaxSize), whatever the content's length.
	Parallel int
	// Size is the content's length when known, for Progress. Zero means:
	// find it out from r (a regular *os.File, or a reader with Len such as
	// *bytes.Reader); -1 means unknown.
	Size int64
	// Progress, when set, is called with the bytes settled so far (read,
	// hashed and either found held by the cluster or uploaded) and the
	// total (-1 when unknown). Calls come from the upload's goroutines, one
	// at a time, with done never decreasing; keep it quick.
	Progress func(done, total int64)
	// OnProgress, when set, is called with the same timing as Progress,
	// with the settled bytes split into those sent and those skipped
	// because the cluster held their chunks already.
	OnProgress func(UploadProgress)
	// Stats, when set, receives the upload's figures, also when it fails.
	Stats *UploadStats
}

// UploadProgress is an upload's progress so far: Sent + Skipped bytes are
// settled, out of Total (-1 when unknown).
type UploadProgress struct {
	Sent    int64 // bytes of chunk bodies uploaded
	Skipped int64 // bytes of chunks the cluster held already, not sent
	Total   int64
}

// Settled is the bytes read, hashed and either sent or skipped.
func (p UploadProgress) Settled() int64 { return p.Sent + p.Skipped }

// UploadStats describes what an upload did.
type UploadStats struct {
	Size           int64         // content bytes read
	Chunks         int           // chunks in the manifest
	ChunksUploaded int           // chunk bodies sent; the rest were held already
	BytesSent      int64         // bytes of the chunk bodies sent
	Elapsed        time.Duration // from the first read to the publish's answer
}

// DefaultUploadParallel is UploadOptions.Parallel when zero.
const DefaultUploadParallel = 4

// Limits of the chunk endpoints.
const (
	missingBatchMax   = 10_000 // digests per /chunks/missing call (the server takes 100,000)
	uploadSpareBodies = 4      // chunk bodies held beyond Parallel: the ones awaiting the missing check
)

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// UploadArtifact cuts r into content-defined chunks (FastCDC, see
// ChunkMinSize/ChunkAvgSize/ChunkMaxSize), hashes each chunk and the whole
// content while reading, asks the cluster which chunks the tenant lacks,
// uploads only those (uo.Parallel at a time), and publishes the manifest as
// a new version of name. Memory stays flat whatever r's length: r is read
// once, as a stream.
//
// The publish carries an Idempotency-Key from opts or the context, else
// its place in the client's session (or a random key without sessions),
// so its retries never make a second version; publishing
// content and fields equal to the name's latest version returns that
// version. opts apply to the publish; an At option also pins the chunk
// calls to its endpoint. Chunk uploads always use keys of their own.
func (c *Client) UploadArtifact(ctx context.Context, tenant, name string, r io.Reader, uo UploadOptions, opts ...RequestOption) (*Manifest, error) {
	if err := artifactName(tenant, name); err != nil {
		return nil, err
	}
	if uo.Parallel < 0 {
		return nil, fmt.Errorf("%w: Parallel must not be negative, got %d", ErrInvalidArgument, uo.Parallel)
	}
	start := time.Now()
	u := newUploader(c, tenant, uo, collectOptions(ctx, opts))
	req, err := u.run(ctx, r)
	if uo.Stats != nil {
		*uo.Stats = u.snapshot(time.Since(start))
	}
	if err != nil {
		return nil, err
	}
	req.MediaType, req.Sources, req.Metadata, req.TaskID, req.Fence = uo.MediaType, uo.Sources, uo.Metadata, uo.TaskID, uo.Fence
	// The server reads every chunk back to check the digest: give big
	// artifacts time for it on top of the per-attempt timeout.
	opts = append(opts, extendTimeout(time.Duration(req.Size/(64<<20))*time.Second))
	m, err := c.PublishArtifact(ctx, tenant, name, *req, opts...)
	if uo.Stats != nil {
		uo.Stats.Elapsed = time.Since(start)
	}
	return m, err
}

// pendingChunk is a chunk body on its way through the upload pipeline.
type pendingChunk struct {
	body   []byte // a buffer from uploader.free
	digest string
}

// uploader runs one UploadArtifact: the calling goroutine reads and cuts,
// one goroutine checks which chunks are missing, Parallel goroutines upload.
// Bodies are held in buffers from free, so at most cap(free) exist.
type uploader struct {
	c        *Client
	tenant   string
	parallel int
	pin      []RequestOption // At(endpoint) when the caller pinned one
	total    int64
	progress func(done, total int64)
	onProg   func(UploadProgress)

	free chan []byte

	mu       sync.Mutex
	done     int64 // bytes settled, for progress
	sent     int64 // of done, bytes uploaded (the rest were skipped)
	stats    UploadStats
	firstErr error
	cancel   context.CancelFunc
}

func newUploader(c *Client, tenant string, uo UploadOptions, o requestOptions) *uploader {
	p := uo.Parallel
	if p == 0 {
		p = DefaultUploadParallel
	}
	u := &uploader{c: c, tenant: tenant, parallel: p, total: uo.Size, progress: uo.Progress, onProg: uo.OnProgress,
		free: make(chan []byte, p+uploadSpareBodies)}
	for range cap(u.free) {
		u.free <- nil // buffers grow on first use, to the largest chunk they carry
	}
	if o.endpoint != "" {
		u.pin = []RequestOption{At(o.endpoint)}
	}
	return u
}

func (u *uploader) snapshot(elapsed time.Duration) UploadStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.stats
	s.Elapsed = elapsed
	return s
}

// fail records the first error and stops the pipeline.
func (u *uploader) fail(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.firstErr == nil {
		u.firstErr = err
		u.cancel()
	}
}

// settle counts n more bytes as done, sent or skipped, and reports
// progress.
func (u *uploader) settle(n int64, sent bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.done += n
	if sent {
		u.sent += n
	}
	if u.progress != nil {
		u.progress(u.done, u.total)
	}
	if u.onProg != nil {
		u.onProg(UploadProgress{Sent: u.sent, Skipped: u.done - u.sent, Total: u.total})
	}
}

func (u *uploader) release(b []byte) { u.free <- b[:0] } // never blocks: one slot per buffer

// run uploads every missing chunk of r and returns the manifest's content
// fields.
func (u *uploader) run(ctx context.Context, r io.Reader) (*PublishRequest, error) {
	if u.total == 0 {
		u.total = readerSize(r)
	}
	ctx, u.cancel = context.WithCancel(ctx)
	defer u.cancel()
	toCheck := make(chan *pendingChunk, cap(u.free))
	toUpload := make(chan *pendingChunk)
	var digests []string // written by check, read after wg.Wait
	var wg sync.WaitGroup
	wg.Go(func() { digests = u.check(ctx, toCheck, toUpload) })
	for range u.parallel {
		wg.Go(func() { u.upload(ctx, toUpload) })
	}
	req, err := u.cut(ctx, r, toCheck)
	if err != nil {
		u.fail(err) // stop the uploads still queued
	}
	close(toCheck)
	wg.Wait()
	u.mu.Lock()
	if u.firstErr != nil {
		err = u.firstErr
	}
	u.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for i := range req.Chunks {
		req.Chunks[i].Digest = digests[i]
	}
	return req, nil
}

// cut reads r, hashes the whole content and hands each chunk to check.
func (u *uploader) cut(ctx context.Context, r io.Reader, toCheck chan<- *pendingChunk) (*PublishRequest, error) {
	ch, err := newChunker(r)
	if err != nil {
		return nil, err
	}
	whole := sha256.New()
	req := &PublishRequest{Chunks: []ChunkRef{}}
	for {
		data, err := ch.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read artifact content: %w", err)
		}
		var buf []byte
		select {
		case buf = <-u.free:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		buf = append(buf, data...)
		whole.Write(buf)
		req.Chunks = append(req.Chunks, ChunkRef{Size: int64(len(buf))})
		req.Size += int64(len(buf))
		u.mu.Lock()
		u.stats.Size, u.stats.Chunks = req.Size, len(req.Chunks)
		u.mu.Unlock()
		select {
		case toCheck <- &pendingChunk{body: buf}:
		case <-ctx.Done():
			u.release(buf)
			return nil, ctx.Err()
		}
	}
	req.Digest = "sha256:" + hex.EncodeToString(whole.Sum(nil))
	return req, nil
}

// check hashes each chunk, asks in batches which ones the tenant lacks,
// passes those to the uploaders and releases the others. It returns the
// chunks' digests in order. A digest met twice in one upload is sent once.
func (u *uploader) check(ctx context.Context, toCheck <-chan *pendingChunk, toUpload chan<- *pendingChunk) []string {
	defer close(toUpload)
	var digests []string
	seen := map[string]bool{} // digests already settled or on their way up
	for first := range toCheck {
		batch := []*pendingChunk{first}
	drain:
		for len(batch) < cap(u.free) {
			select {
			case p, ok := <-toCheck:
				if !ok {
					break drain
				}
				batch = append(batch, p)
			default:
				break drain
			}
		}
		var ask []string
		for _, p := range batch {
			p.digest = Digest(p.body)
			digests = append(digests, p.digest)
			if !seen[p.digest] {
				seen[p.digest] = true
				ask = append(ask, p.digest)
			}
		}
		if ctx.Err() != nil {
			u.drop(batch)
			continue // drain toCheck so cut never blocks
		}
		missing, err := u.c.MissingChunks(ctx, u.tenant, ask, u.pin...)
		if err != nil {
			u.fail(fmt.Errorf("ask for missing chunks: %w", err))
			u.drop(batch)
			continue
		}
		need := make(map[string]bool, len(missing))
		for _, d := range missing {
			need[d] = true
		}
		for _, p := range batch {
			if !need[p.digest] {
				n := int64(len(p.body))
				u.release(p.body)
				u.settle(n, false)
				continue
			}
			delete(need, p.digest) // a twin later in the batch is not sent again
			select {
			case toUpload <- p:
			case <-ctx.Done():
				u.release(p.body)
			}
		}
	}
	return digests
}

func (u *uploader) drop(batch []*pendingChunk) {
	for _, p := range batch {
		u.release(p.body)
	}
}

// upload sends the chunks it receives.
func (u *uploader) upload(ctx context.Context, toUpload <-chan *pendingChunk) {
	for p := range toUpload {
		n := int64(len(p.body))
		if ctx.Err() == nil {
			// A fresh key per chunk: a key carried by ctx belongs to the publish.
			opts := append([]RequestOption{IdempotencyKey("")}, u.pin...)
			if _, err := u.c.PutChunk(ctx, u.tenant, p.digest, p.body, opts...); err != nil {
				u.fail(fmt.Errorf("upload chunk %s: %w", p.digest, err))
			} else {
				u.mu.Lock()
				u.stats.ChunksUploaded++
				u.stats.BytesSent += n
				u.mu.Unlock()
				u.settle(n, true)
			}
		}
		u.release(p.body)
	}
}

// readerSize is the number of bytes left in r when r can tell, else -1.
func readerSize(r io.Reader) int64 {
	switch v := r.(type) {
	case interface{ Len() int }:
		return int64(v.Len())
	case *os.File:
		fi, err := v.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return -1
		}
		off, err := v.Seek(0, io.SeekCurrent)
		if err != nil {
			return -1
		}
		return fi.Size() - off
	}
	return -1
}

// PublishArtifact publishes a manifest of chunks the tenant already holds
// as a new version of name; UploadArtifact does the whole job. When the
// manifest equals the name's latest version, that version is returned
// (status 200) and no new one is made.
func (c *Client) PublishArtifact(ctx context.Context, tenant, name string, req PublishRequest, opts ...RequestOption) (*Manifest, error) {
	if err := artifactName(tenant, name); err != nil {
		return nil, err
	}
	if req.Chunks == nil {
		req.Chunks = []ChunkRef{}
	}
	var out Manifest
	if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "artifacts", name, "versions"), req.wire(), &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetManifest returns one version of an artifact; version 0 is the latest.
func (c *Client) GetManifest(ctx context.Context, tenant, name string, version uint64, opts ...RequestOption) (*Manifest, error) {
	if err := artifactName(tenant, name); err != nil {
		return nil, err
	}
	if version == 0 {
		list, err := c.ListVersions(ctx, tenant, name, opts...)
		if err != nil {
			return nil, err
		}
		if len(list) == 0 {
			return nil, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "artifact " + name + " has no versions"}
		}
		return &list[len(list)-1], nil
	}
	var out Manifest
	path := tenantPath(tenant, "artifacts", name, "versions", strconv.FormatUint(version, 10))
	if _, err := c.Do(ctx, http.MethodGet, path, nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListVersions returns every version of an artifact, oldest first; none
// (and no error) for a name never published.
func (c *Client) ListVersions(ctx context.Context, tenant, name string, opts ...RequestOption) ([]Manifest, error) {
	if err := artifactName(tenant, name); err != nil {
		return nil, err
	}
	var out struct {
		Versions []Manifest `json:"versions"`
	}
	if _, err := c.Do(ctx, http.MethodGet, tenantPath(tenant, "artifacts", name, "versions"), nil, &out, opts...); err != nil {
		return nil, err
	}
	return out.Versions, nil
}

// GetArtifactByID returns the newest publication of an artifact id.
func (c *Client) GetArtifactByID(ctx context.Context, tenant, artifactID string, opts ...RequestOption) (*Manifest, error) {
	if err := required("tenant", tenant, "artifact id", artifactID); err != nil {
		return nil, err
	}
	var out Manifest
	if _, err := c.Do(ctx, http.MethodGet, tenantPath(tenant, "artifacts", "by-id", artifactID), nil, &out, opts...); err != nil {
		return nil, err
	}
	return &out, nil
}

// MissingChunks returns the digests the tenant does not hold, in the order
// given. Long lists are asked in several calls.
func (c *Client) MissingChunks(ctx context.Context, tenant string, digests []string, opts ...RequestOption) ([]string, error) {
	if err := required("tenant", tenant); err != nil {
		return nil, err
	}
	missing := []string{}
	for len(digests) > 0 {
		batch := digests[:min(len(digests), missingBatchMax)]
		digests = digests[len(batch):]
		var out wire.MissingChunks
		in := wire.ChunksMissing{Digests: batch}
		if _, err := c.Do(ctx, http.MethodPost, tenantPath(tenant, "chunks", "missing"), in, &out, opts...); err != nil {
			return nil, err
		}
		missing = append(missing, out.Missing...)
	}
	return missing, nil
}

// PutChunk uploads one chunk body under its digest. created is false when
// the tenant held it already. The answer comes once a majority of nodes
// holds the body. ErrDigestMismatch when body does not hash to digest,
// ErrTooLarge over the server's limit (ChunkMaxSize by default).
func (c *Client) PutChunk(ctx context.Context, tenant, digest string, body []byte, opts ...RequestOption) (created bool, err error) {
	if err := required("tenant", tenant, "digest", digest); err != nil {
		return false, err
	}
	if body == nil {
		body = []byte{}
	}
	meta, err := c.Do(ctx, http.MethodPut, tenantPath(tenant, "chunks", digest), body, nil, opts...)
	return err == nil && meta.Status == http.StatusCreated, err
}

// GetChunk returns a chunk body the tenant holds, verified against digest
// (ErrDigestMismatch otherwise).
func (c *Client) GetChunk(ctx context.Context, tenant, digest string, opts ...RequestOption) ([]byte, error) {
	if err := required("tenant", tenant, "digest", digest); err != nil {
		return nil, err
	}
	var body []byte
	if _, err := c.Do(ctx, http.MethodGet, tenantPath(tenant, "chunks", digest), nil, &body, opts...); err != nil {
		return nil, err
	}
	if body == nil {
		body = []byte{}
	}
	if got := Digest(body); got != digest {
		return nil, fmt.Errorf("%w: chunk %s: received bytes hash to %s", ErrDigestMismatch, digest, got)
	}
	return body, nil
}

// DownloadArtifact streams one version's content into w (version 0: the
// latest) and checks its size and digest against the server's
// Content-Length and ETag. It returns the bytes written.
//
// The bytes reach w as they arrive, before the check can be made: when it
// fails (an error matching ErrDigestMismatch) w has already received the
// wrong or incomplete content, and the caller must discard it. A download
// cut short by the network also matches ErrUnavailable. DownloadArtifactTo
// leaves nothing behind in such a case.
//
// Failover and retries apply until the response starts; after that a
// failure is final. Config.Timeout bounds the wait for the response and
// any pause in the stream, not the whole transfer. Stale and At apply.
func (c *Client) DownloadArtifact(ctx context.Context, tenant, name string, version uint64, w io.Writer, opts ...RequestOption) (int64, error) {
	if err := artifactName(tenant, name); err != nil {
		return 0, err
	}
	var want *Manifest
	if version == 0 {
		m, err := c.GetManifest(ctx, tenant, name, 0, opts...)
		if err != nil {
			return 0, err
		}
		want, version = m, m.Version
	}
	path := tenantPath(tenant, "artifacts", name, "versions", strconv.FormatUint(version, 10), "content")
	var n int64
	err := c.stream(ctx, path, collectOptions(ctx, opts), func(resp *http.Response, body io.Reader) error {
		digest, size := strings.Trim(resp.Header.Get("ETag"), `"`), resp.ContentLength
		if want != nil {
			digest, size = want.Digest, want.Size
		} else if !digestRE.MatchString(digest) || size < 0 {
			m, err := c.GetManifest(ctx, tenant, name, version, opts...)
			if err != nil {
				return err
			}
			digest, size = m.Digest, m.Size
		}
		var err error
		n, err = copyVerified(w, body, digest, size)
		return err
	})
	return n, err
}

// copyVerified copies body to w while hashing it, then compares.
func copyVerified(w io.Writer, body io.Reader, digest string, size int64) (int64, error) {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(sinkWriter{w}, h), body)
	if err != nil {
		var serr sinkError
		if errors.As(err, &serr) {
			return n, serr.err
		}
		return n, fmt.Errorf("%w: %w: download cut short after %d of %d bytes: %w", ErrUnavailable, ErrDigestMismatch, n, size, err)
	}
	if n != size {
		return n, fmt.Errorf("%w: received %d bytes, want %d", ErrDigestMismatch, n, size)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return n, fmt.Errorf("%w: received content hashes to %s, want %s", ErrDigestMismatch, got, digest)
	}
	return n, nil
}

// DownloadArtifactTo downloads into a temporary file beside path and
// renames it to path only once the size and digest are verified (and the
// file is synced), so path never holds partial or wrong content. An
// existing file at path is replaced only on success.
func (c *Client) DownloadArtifactTo(ctx context.Context, tenant, name string, version uint64, path string, opts ...RequestOption) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return 0, err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := c.DownloadArtifact(ctx, tenant, name, version, tmp, opts...)
	if err != nil {
		return n, err
	}
	if err := tmp.Sync(); err != nil {
		return n, err
	}
	if err := tmp.Close(); err != nil {
		return n, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return n, err
	}
	ok = true
	return n, nil
}

// sinkWriter marks the errors of the caller's writer, to tell them from
// the network's.
type sinkWriter struct{ w io.Writer }

type sinkError struct{ err error }

func (e sinkError) Error() string { return e.err.Error() }
func (e sinkError) Unwrap() error { return e.err }

func (s sinkWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		err = sinkError{err}
	}
	return n, err
}

// stream sends a GET for path and hands a 200 response to read, with its
// body guarded by an idle timeout. Failover, backoff and the retry budget
// are those of Do, but only until a response starts: once read is called,
// its error is final. An error response is returned as *Error.
func (c *Client) stream(ctx context.Context, path string, o requestOptions, read func(*http.Response, io.Reader) error) error {
	cl, err := c.newCall(http.MethodGet, path, nil, o)
	if err != nil {
		return err
	}
	eps, start := c.endpoints, int(c.preferred.Load())
	if o.endpoint != "" {
		ep, err := transport.Endpoint(o.endpoint)
		if err != nil {
			return err
		}
		eps, start = []string{ep}, 0
	}
	deadline := time.Now().Add(c.maxRetry)
	bo := backoff.Backoff{}
	var roundRetryAfter time.Duration
	for i := 0; ; i++ {
		idx := (start + i) % len(eps)
		resp, cancel, res := c.open(ctx, eps[idx], cl)
		if resp != nil {
			if o.endpoint == "" {
				c.preferred.Store(int64(idx))
			}
			body := newIdleReader(resp.Body, cl.timeout, cancel)
			err := read(resp, body)
			body.stop()
			resp.Body.Close()
			cancel()
			if err != nil && body.stalled() {
				err = fmt.Errorf("%w (no data for %v)", err, cl.timeout)
			}
			return err
		}
		if o.endpoint == "" && res.answered {
			c.preferred.Store(int64(idx))
		}
		if !res.retry || o.endpoint != "" {
			return res.err
		}
		roundRetryAfter = max(roundRetryAfter, res.retryAfter)
		remaining := time.Until(deadline)
		delay := time.Duration(0)
		if (i+1)%len(eps) == 0 {
			delay = bo.Delay(roundRetryAfter, remaining)
			roundRetryAfter = 0
		}
		if delay >= remaining {
			return fmt.Errorf("%w (gave up after %d attempts)", res.err, i+1)
		}
		if err := backoff.Sleep(ctx, delay); err != nil {
			return fmt.Errorf("%w (last error: %w)", err, res.err)
		}
	}
}

// open makes one attempt. On a 200 it returns the response, whose body the
// caller reads and closes, and the cancel func of its context; otherwise
// the failure as a result.
func (c *Client) open(ctx context.Context, endpoint string, cl *call) (*http.Response, context.CancelFunc, result) {
	actx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(cl.timeout, cancel) // until the headers arrive
	req, err := c.request(actx, endpoint, cl)
	if err != nil {
		timer.Stop()
		cancel()
		return nil, nil, result{err: err}
	}
	resp, err := c.hc.Do(req)
	timer.Stop()
	if err != nil {
		cancel()
		return nil, nil, transportFailure(ctx, cl, endpoint, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, cancel, result{}
	}
	defer cancel()
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, transportFailure(ctx, cl, endpoint, err)
	}
	res := responseResult(resp, body)
	if res.err == nil { // another 2xx: not content
		res.err = fmt.Errorf("GET %s%s: unexpected status %d", endpoint, cl.path, resp.StatusCode)
	}
	return nil, nil, res
}

// idleReader cancels the request when no data arrives for timeout.
type idleReader struct {
	r       io.Reader
	timeout time.Duration
	timer   *time.Timer
	mu      sync.Mutex
	fired   bool
}

func newIdleReader(r io.Reader, timeout time.Duration, cancel context.CancelFunc) *idleReader {
	ir := &idleReader{r: r, timeout: timeout}
	ir.timer = time.AfterFunc(timeout, func() {
		ir.mu.Lock()
		ir.fired = true
		ir.mu.Unlock()
		cancel()
	})
	return ir
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.timer.Reset(ir.timeout)
	}
	return n, err
}

func (ir *idleReader) stop() { ir.timer.Stop() }

func (ir *idleReader) stalled() bool {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	return ir.fired
}
