package client

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
)

// A full backup (GET /v1/cluster/backup, `baton backup save`, `batond
// restore`; docs/operations.md "Backup and restore") is a framed stream:
//
//	"BATONBAK"                            8 bytes of magic
//	frame*                                type (1 byte) | length (uint32, big-endian) | payload
//
// The frames come in this order:
//
//	'H' once   JSON BackupHeader
//	'S' any    the next piece of the state, in the snapshot format a
//	           node's Raft snapshots hold (zstd, msgpack records)
//	'C' any    a chunk: its SHA-256 (32 raw bytes), then its body
//	'E' once   JSON BackupEnd; its sha256 covers every byte before
//	           this frame, the magic included
//
// A server that fails after the header went out sends an 'X' frame (JSON
// {"error": "..."}) instead of 'E' when it still can. A stream without a
// verified 'E' frame is not a backup.
const (
	backupMagic = "BATONBAK"
	// BackupFormat is the format version in BackupHeader.Format.
	BackupFormat = 1

	frameHeader = 'H'
	frameState  = 'S'
	frameChunk  = 'C'
	frameEnd    = 'E'
	frameError  = 'X'

	maxMetaFrame  = 1 << 20  // 'H', 'E', 'X'
	maxStateFrame = 16 << 20 // servers write 64 KiB
	maxChunkFrame = 64 << 20 // bodies are bounded by the server's chunk limit (4 MiB by default)
)

// ErrBadBackup is returned for a stream that is not a whole, intact backup.
var ErrBadBackup = errors.New("bad backup")

// BackupHeader opens a backup: where the state was taken and what follows.
type BackupHeader struct {
	Format       int    `json:"format"`
	AppliedIndex uint64 `json:"applied_index"`
	StateDigest  string `json:"state_digest"` // as GET /v1/cluster reports it at AppliedIndex
	Chunks       int64  `json:"chunks"`
	ChunkBytes   int64  `json:"chunk_bytes"`
	NodeID       string `json:"node_id"`
	CreatedAt    string `json:"created_at"`
}

// BackupEnd closes a backup.
type BackupEnd struct {
	StateBytes  int64  `json:"state_bytes"`
	StateSHA256 string `json:"state_sha256"`
	Chunks      int64  `json:"chunks"`
	ChunkBytes  int64  `json:"chunk_bytes"`
	SHA256      string `json:"sha256"`
}

// BackupReader reads and verifies a backup: the header, then the state
// (State), then the chunks (NextChunk) up to the end frame. Every check
// (chunk digests, the state's hash and size, the counts, the whole
// stream's hash) is made on the way; only NextChunk's io.EOF says the
// backup was whole. It holds one chunk in memory at a time.
type BackupReader struct {
	r      *bufio.Reader
	sum    hash.Hash // every byte before the end frame
	Header BackupHeader
	End    BackupEnd

	stateSum  hash.Hash
	stateLeft int64 // bytes left in the current 'S' frame
	stateDone bool
	pending   *frameHead // read after the last 'S' frame
	chunks    int64
	chunkB    int64
	stateB    int64
	done      bool
}

type frameHead struct {
	typ byte
	n   uint32
	raw [5]byte
}

// NewBackupReader reads the magic and the header.
func NewBackupReader(r io.Reader) (*BackupReader, error) {
	b := &BackupReader{r: bufio.NewReaderSize(r, 1<<16), sum: sha256.New(), stateSum: sha256.New()}
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(b.r, magic); err != nil {
		return nil, fmt.Errorf("%w: reading the magic: %v", ErrBadBackup, err)
	}
	if string(magic) != backupMagic {
		return nil, fmt.Errorf("%w: not a Baton backup (magic %q)", ErrBadBackup, magic)
	}
	b.sum.Write(magic)
	fh, err := b.head()
	if err != nil {
		return nil, err
	}
	if fh.typ != frameHeader {
		return nil, fmt.Errorf("%w: first frame is %q, want the header", ErrBadBackup, fh.typ)
	}
	if err := b.meta(fh, &b.Header); err != nil {
		return nil, err
	}
	if b.Header.Format != BackupFormat {
		return nil, fmt.Errorf("%w: format %d, this build reads %d", ErrBadBackup, b.Header.Format, BackupFormat)
	}
	return b, nil
}

// head reads a frame's type and length, and hashes them unless the frame
// is the end frame.
func (b *BackupReader) head() (*frameHead, error) {
	var fh frameHead
	if _, err := io.ReadFull(b.r, fh.raw[:]); err != nil {
		return nil, fmt.Errorf("%w: truncated (%v)", ErrBadBackup, err)
	}
	fh.typ, fh.n = fh.raw[0], binary.BigEndian.Uint32(fh.raw[1:])
	limit := uint32(maxMetaFrame)
	switch fh.typ {
	case frameState:
		limit = maxStateFrame
	case frameChunk:
		limit = maxChunkFrame
	case frameHeader, frameEnd, frameError:
	default:
		return nil, fmt.Errorf("%w: unknown frame type %q", ErrBadBackup, fh.typ)
	}
	if fh.n > limit {
		return nil, fmt.Errorf("%w: %q frame of %d bytes (limit %d)", ErrBadBackup, fh.typ, fh.n, limit)
	}
	if fh.typ != frameEnd {
		b.sum.Write(fh.raw[:])
	}
	return &fh, nil
}

// meta reads a JSON frame's payload into v.
func (b *BackupReader) meta(fh *frameHead, v any) error {
	p := make([]byte, fh.n)
	if _, err := io.ReadFull(b.r, p); err != nil {
		return fmt.Errorf("%w: truncated %q frame (%v)", ErrBadBackup, fh.typ, err)
	}
	if fh.typ != frameEnd {
		b.sum.Write(p)
	}
	if fh.typ == frameError {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(p, &e)
		return fmt.Errorf("%w: the server failed while writing it: %s", ErrBadBackup, e.Error)
	}
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("%w: %q frame: %v", ErrBadBackup, fh.typ, err)
	}
	return nil
}

// State returns the state stream (what `batond restore` writes as the
// Raft snapshot). It must be read before NextChunk is called; NextChunk
// skips what is left of it.
func (b *BackupReader) State() io.Reader { return stateReader{b} }

type stateReader struct{ b *BackupReader }

func (s stateReader) Read(p []byte) (int, error) {
	b := s.b
	for b.stateLeft == 0 {
		if b.stateDone {
			return 0, io.EOF
		}
		fh, err := b.head()
		if err != nil {
			return 0, err
		}
		if fh.typ != frameState {
			b.stateDone, b.pending = true, fh
			return 0, io.EOF
		}
		b.stateLeft = int64(fh.n)
	}
	if int64(len(p)) > b.stateLeft {
		p = p[:b.stateLeft]
	}
	n, err := b.r.Read(p)
	b.stateLeft -= int64(n)
	b.stateB += int64(n)
	b.sum.Write(p[:n])
	b.stateSum.Write(p[:n])
	if err == io.EOF {
		err = fmt.Errorf("%w: truncated in the state", ErrBadBackup)
	}
	return n, err
}

// NextChunk returns the next chunk, its body verified against its digest.
// After the last one it verifies the end frame and returns io.EOF; any
// other error means the backup is not whole or not intact.
func (b *BackupReader) NextChunk() (digest string, body []byte, err error) {
	if b.done {
		return "", nil, io.EOF
	}
	if !b.stateDone || b.stateLeft > 0 {
		if _, err := io.Copy(io.Discard, b.State()); err != nil {
			return "", nil, err
		}
	}
	fh := b.pending
	b.pending = nil
	if fh == nil {
		if fh, err = b.head(); err != nil {
			return "", nil, err
		}
	}
	switch fh.typ {
	case frameChunk:
		if fh.n < sha256.Size {
			return "", nil, fmt.Errorf("%w: chunk frame of %d bytes", ErrBadBackup, fh.n)
		}
		p := make([]byte, fh.n)
		if _, err := io.ReadFull(b.r, p); err != nil {
			return "", nil, fmt.Errorf("%w: truncated in chunk %d (%v)", ErrBadBackup, b.chunks+1, err)
		}
		b.sum.Write(p)
		want, body := p[:sha256.Size], p[sha256.Size:]
		digest = "sha256:" + hex.EncodeToString(want)
		if got := sha256.Sum256(body); string(got[:]) != string(want) {
			return "", nil, fmt.Errorf("%w: chunk %s: body hashes to sha256:%x", ErrDigestMismatch, digest, got)
		}
		b.chunks++
		b.chunkB += int64(len(body))
		return digest, body, nil
	case frameEnd:
		return "", nil, b.finish(fh)
	case frameError:
		return "", nil, b.meta(fh, nil)
	}
	return "", nil, fmt.Errorf("%w: unexpected %q frame after the state", ErrBadBackup, fh.typ)
}

// finish checks the end frame against what was read, and that nothing
// follows it.
func (b *BackupReader) finish(fh *frameHead) error {
	sum := "sha256:" + hex.EncodeToString(b.sum.Sum(nil))
	if err := b.meta(fh, &b.End); err != nil {
		return err
	}
	e, h := b.End, b.Header
	stateSum := "sha256:" + hex.EncodeToString(b.stateSum.Sum(nil))
	switch {
	case e.SHA256 != sum:
		return fmt.Errorf("%w: the stream hashes to %s, its end frame says %s", ErrDigestMismatch, sum, e.SHA256)
	case e.StateSHA256 != stateSum || e.StateBytes != b.stateB:
		return fmt.Errorf("%w: state of %d bytes hashing to %s, the end frame says %d bytes, %s", ErrDigestMismatch, b.stateB, stateSum, e.StateBytes, e.StateSHA256)
	case e.Chunks != b.chunks || e.ChunkBytes != b.chunkB || h.Chunks != b.chunks || h.ChunkBytes != b.chunkB:
		return fmt.Errorf("%w: %d chunks of %d bytes read; the header says %d of %d, the end frame %d of %d",
			ErrBadBackup, b.chunks, b.chunkB, h.Chunks, h.ChunkBytes, e.Chunks, e.ChunkBytes)
	}
	if _, err := b.r.ReadByte(); err != io.EOF {
		return fmt.Errorf("%w: data after the end frame", ErrBadBackup)
	}
	b.done = true
	return io.EOF
}

// BackupProgress is how far a backup download is.
type BackupProgress struct {
	Header     *BackupHeader // nil until the header arrived
	Bytes      int64         // received so far
	StateBytes int64         // received of the state
	StateDone  bool
	Chunks     int64 // received and verified
	ChunkBytes int64
}

// BackupSummary describes a whole, verified backup.
type BackupSummary struct {
	Header BackupHeader
	End    BackupEnd
	Bytes  int64
}

// Backup streams a full backup (GET /v1/cluster/backup, admin) into w and
// verifies it on the way: every chunk against its digest, the state and
// the whole stream against the end frame. progress (may be nil) is called
// as data arrives. Like DownloadArtifact, w has the bytes before the
// check: on an error the caller discards them (BackupTo does). Failover
// applies until the response starts.
func (c *Client) Backup(ctx context.Context, w io.Writer, progress func(BackupProgress), opts ...RequestOption) (*BackupSummary, error) {
	var sum *BackupSummary
	err := c.stream(ctx, "/v1/cluster/backup", collectOptions(ctx, opts), func(_ *http.Response, body io.Reader) error {
		cr := &countingReader{r: body}
		br, err := NewBackupReader(io.TeeReader(cr, sinkWriter{w}))
		if err != nil {
			return backupErr(err)
		}
		p := BackupProgress{Header: &br.Header}
		report := func() {
			if progress != nil {
				p.Bytes = cr.n
				progress(p)
			}
		}
		report()
		buf := make([]byte, 64<<10)
		st := br.State()
		for {
			n, err := st.Read(buf)
			p.StateBytes += int64(n)
			report()
			if err == io.EOF {
				break
			}
			if err != nil {
				return backupErr(err)
			}
		}
		p.StateDone = true
		for {
			_, chunk, err := br.NextChunk()
			if err == io.EOF {
				break
			}
			if err != nil {
				return backupErr(err)
			}
			p.Chunks++
			p.ChunkBytes += int64(len(chunk))
			report()
		}
		report()
		sum = &BackupSummary{Header: br.Header, End: br.End, Bytes: cr.n}
		return nil
	})
	return sum, err
}

// backupErr keeps the caller's writer's errors as they are, and marks a
// stream cut short by the network as unavailable.
func backupErr(err error) error {
	var serr sinkError
	if errors.As(err, &serr) {
		return serr.err
	}
	return err
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// BackupTo writes a verified backup to path through a temporary file
// beside it, synced and renamed only once the whole stream verified: path
// never holds a partial or corrupt backup, and an existing file there is
// replaced only on success.
func (c *Client) BackupTo(ctx context.Context, path string, progress func(BackupProgress), opts ...RequestOption) (*BackupSummary, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	sum, err := c.Backup(ctx, bw, progress, opts...)
	if err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	ok = true
	return sum, nil
}

// VerifyBackup reads a whole backup from r and checks it as Backup does,
// without writing it anywhere.
func VerifyBackup(r io.Reader) (*BackupSummary, error) {
	cr := &countingReader{r: r}
	br, err := NewBackupReader(cr)
	if err != nil {
		return nil, err
	}
	for {
		_, _, err := br.NextChunk()
		if err == io.EOF {
			return &BackupSummary{Header: br.Header, End: br.End, Bytes: cr.n}, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
