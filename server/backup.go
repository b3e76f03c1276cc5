package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"time"
)

// GET /v1/cluster/backup streams a full backup: a consistent view of the
// state and the body of every chunk that state holds, in the framed format
// of client/backup.go (docs/operations.md "Backup and restore"), which
// `baton backup save` verifies and `batond restore` reads. Memory stays
// bounded: the state is a copy-on-write clone written as it is encoded,
// and one chunk body is in memory at a time.
const (
	backupMagic     = "BATONBAK"
	backupFormat    = 1
	backupStateSize = 64 << 10 // the state goes out in frames of this size
)

type backupHeader struct {
	Format       int    `json:"format"`
	AppliedIndex uint64 `json:"applied_index"`
	StateDigest  string `json:"state_digest"`
	Chunks       int64  `json:"chunks"`
	ChunkBytes   int64  `json:"chunk_bytes"`
	NodeID       string `json:"node_id"`
	CreatedAt    string `json:"created_at"`
}

type backupEnd struct {
	StateBytes  int64  `json:"state_bytes"`
	StateSHA256 string `json:"state_sha256"`
	Chunks      int64  `json:"chunks"`
	ChunkBytes  int64  `json:"chunk_bytes"`
	SHA256      string `json:"sha256"`
}

func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request, id *identity) error {
	if err := id.requireAdmin(); err != nil {
		return err
	}
	view := s.fsm.BackupView()
	hdr := backupHeader{Format: backupFormat, AppliedIndex: view.AppliedIndex(), StateDigest: view.StateDigest(),
		NodeID: s.cluster.ID(), CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	_ = view.Chunks(func(_ string, size int64) error {
		hdr.Chunks++
		hdr.ChunkBytes += size
		return nil
	})
	if hdr.Chunks > 0 {
		if _, err := s.chunkStore(); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="baton-%d.backup"`, hdr.AppliedIndex))
	setIndex(w, hdr.AppliedIndex)
	bw := &backupWriter{w: bufio.NewWriterSize(w, 1<<16), sum: sha256.New(), state: sha256.New()}
	err := bw.write(func() error {
		if err := bw.meta('H', hdr); err != nil {
			return err
		}
		sw := &stateFrames{bw: bw, buf: make([]byte, 0, backupStateSize)}
		if err := view.WriteState(sw); err != nil {
			return fmt.Errorf("state: %w", err)
		}
		if err := sw.flush(); err != nil {
			return err
		}
		// The request's deadline bounds waiting for Raft, not a transfer
		// of any length: each chunk gets its own bound, and a client that
		// goes away fails the next write.
		base := context.WithoutCancel(r.Context())
		if err := view.Chunks(func(digest string, size int64) error {
			ctx, cancel := context.WithTimeout(base, 30*time.Second)
			defer cancel()
			body, err := s.readChunk(ctx, digest)
			if err != nil {
				return fmt.Errorf("chunk %s: %w", digest, err)
			}
			if int64(len(body)) != size {
				return fmt.Errorf("chunk %s: %d bytes, the state says %d", digest, len(body), size)
			}
			return bw.chunk(digest, body)
		}); err != nil {
			return err
		}
		if bw.chunks != hdr.Chunks || bw.chunkBytes != hdr.ChunkBytes {
			return fmt.Errorf("wrote %d chunks of %d bytes, counted %d of %d", bw.chunks, bw.chunkBytes, hdr.Chunks, hdr.ChunkBytes)
		}
		return bw.end()
	})
	if err != nil {
		// The status line went out with the header frame: say why in the
		// stream (an 'X' frame in place of the end frame), and in the log.
		s.log.Warn("backup failed", "applied_index", hdr.AppliedIndex, "err", err)
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		_ = bw.frame('X', b)
		_ = bw.w.Flush()
	}
	return nil
}

// backupWriter writes frames and hashes what it wrote.
type backupWriter struct {
	w          *bufio.Writer
	sum        hash.Hash // every byte before the end frame
	state      hash.Hash
	stateBytes int64
	chunks     int64
	chunkBytes int64
}

func (b *backupWriter) write(body func() error) error {
	if _, err := io.WriteString(b.w, backupMagic); err != nil {
		return err
	}
	b.sum.Write([]byte(backupMagic))
	if err := body(); err != nil {
		return err
	}
	return b.w.Flush()
}

func (b *backupWriter) frame(typ byte, parts ...[]byte) error {
	var head [5]byte
	head[0] = typ
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	binary.BigEndian.PutUint32(head[1:], uint32(n))
	if typ != 'E' {
		b.sum.Write(head[:])
	}
	if _, err := b.w.Write(head[:]); err != nil {
		return err
	}
	for _, p := range parts {
		if typ != 'E' {
			b.sum.Write(p)
		}
		if _, err := b.w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

func (b *backupWriter) meta(typ byte, v any) error {
	p, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.frame(typ, p)
}

func (b *backupWriter) chunk(digest string, body []byte) error {
	raw, err := hex.DecodeString(digest[len("sha256:"):])
	if err != nil || len(raw) != sha256.Size {
		return fmt.Errorf("chunk digest %q", digest)
	}
	b.chunks++
	b.chunkBytes += int64(len(body))
	return b.frame('C', raw, body)
}

func (b *backupWriter) end() error {
	return b.meta('E', backupEnd{
		StateBytes: b.stateBytes, StateSHA256: "sha256:" + hex.EncodeToString(b.state.Sum(nil)),
		Chunks: b.chunks, ChunkBytes: b.chunkBytes,
		SHA256: "sha256:" + hex.EncodeToString(b.sum.Sum(nil)),
	})
}

// stateFrames cuts the state stream into 'S' frames.
type stateFrames struct {
	bw  *backupWriter
	buf []byte
}

func (s *stateFrames) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), cap(s.buf)-len(s.buf))
		s.buf = append(s.buf, p[:k]...)
		p = p[k:]
		if len(s.buf) == cap(s.buf) {
			if err := s.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (s *stateFrames) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	s.bw.state.Write(s.buf)
	s.bw.stateBytes += int64(len(s.buf))
	err := s.bw.frame('S', s.buf)
	s.buf = s.buf[:0]
	return err
}
