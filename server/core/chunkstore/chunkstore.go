// Package chunkstore keeps chunk bodies on a node's disk, beside the Raft
// log, keyed by the SHA-256 of their uncompressed bytes.
//
// Contract: Put returns only after the body is durable (file and directory
// fsynced) under its final name, written through a temporary file and a
// rename, so a crash leaves either nothing or the whole body. Get verifies
// the digest of what it read and reports ErrCorrupt (after removing the bad
// copy) instead of returning wrong bytes. Nothing is cached in memory: the
// store's footprint is one chunk per call in flight (and the aligned
// buffers of direct writes, pooled until the collector frees them),
// however much is stored.
// The empty chunk is always present. Safe for concurrent use.
package chunkstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Errors of the store.
var (
	ErrNotFound    = errors.New("chunkstore: chunk not found")
	ErrCorrupt     = errors.New("chunkstore: stored chunk failed verification")
	ErrMismatch    = errors.New("chunkstore: body does not hash to its digest")
	ErrBadDigest   = errors.New("chunkstore: malformed digest")
	errUnknownKind = errors.New("chunkstore: unknown encoding byte")
	errTooLarge    = errors.New("chunkstore: body over the size limit")
)

// EmptyDigest is the digest of the empty chunk.
const EmptyDigest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidDigest reports whether d is sha256:<64 lowercase hex>.
func ValidDigest(d string) bool { return digestRE.MatchString(d) }

// Digest returns the digest of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// The first byte of a stored file says how the rest is encoded.
const (
	kindRaw  byte = 0
	kindZstd byte = 1
)

// Compression is how a node encodes the chunks it receives from clients
// (batond --chunk-compression). Whatever it is set to, a store reads every
// form: a node started with another setting, or an older node's copies.
type Compression string

// The compressions a store writes.
const (
	// CompressionNone keeps bodies as they came: no CPU on the upload path.
	CompressionNone Compression = "none"
	// CompressionZstd keeps a body zstd-compressed (fastest level) when
	// that is smaller: less disk, and the copies to the peers are smaller,
	// for several times the upload's CPU on the receiving node.
	CompressionZstd Compression = "zstd"
)

// ParseCompression parses a --chunk-compression value.
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case CompressionNone, CompressionZstd:
		return c, nil
	}
	return "", fmt.Errorf("chunk compression %q: want none or zstd", s)
}

// Option configures a Store at Open.
type Option func(*Store)

// WithCompression sets how new bodies are stored (CompressionNone when
// not given).
func WithCompression(c Compression) Option { return func(s *Store) { s.compression = c } }

// Store is a directory of chunk bodies.
type Store struct {
	dir         string
	compression Compression
	enc         *zstd.Encoder // shared; EncodeAll is safe for concurrent use
	dec         *zstd.Decoder
	buffered    atomic.Bool // the file system refused a direct write
}

// Open creates dir if needed.
func Open(dir string, opts ...Option) (*Store, error) {
	s := &Store{dir: dir, compression: CompressionNone}
	for _, o := range opts {
		o(s)
	}
	if _, err := ParseCompression(string(s.compression)); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(64<<20))
	if err != nil {
		return nil, err
	}
	s.enc, s.dec = enc, dec
	return s, nil
}

// Close releases the codec.
func (s *Store) Close() { s.dec.Close() }

func (s *Store) path(digest string) string {
	h := digest[len("sha256:"):]
	return filepath.Join(s.dir, h[:2], h)
}

// Has reports whether the body is stored (not whether it is intact).
func (s *Store) Has(digest string) bool {
	if digest == EmptyDigest {
		return true
	}
	if !ValidDigest(digest) {
		return false
	}
	_, err := os.Stat(s.path(digest))
	return err == nil
}

// Put stores body under digest after checking that it hashes to it.
func (s *Store) Put(digest string, body []byte) error {
	if !ValidDigest(digest) {
		return ErrBadDigest
	}
	if Digest(body) != digest {
		return ErrMismatch
	}
	return s.PutVerified(digest, body)
}

// PutVerified stores body under digest; the caller has just checked that
// the body hashes to it (Put checks it itself).
func (s *Store) PutVerified(digest string, body []byte) error {
	if !s.Compresses() {
		return s.write(digest, []byte{kindRaw}, body) // no encoded copy of the body
	}
	return s.PutEncodedVerified(digest, s.Encode(body))
}

// Compresses reports whether the store compresses what it is given
// (CompressionZstd): whether Encode is worth calling once for the node's
// own copy and its peers' instead of handing them the body.
func (s *Store) Compresses() bool { return s.compression == CompressionZstd }

// Encode returns body in the form the store keeps on disk: an encoding
// byte, then, with CompressionZstd, zstd (fastest) when that is smaller,
// else the raw bytes. A node encodes a new chunk once and hands this form
// to its own store (PutEncodedVerified) and to its peers (PutEncoded),
// which then only decode it to verify.
func (s *Store) Encode(body []byte) []byte {
	if s.compression != CompressionZstd {
		return append(append(make([]byte, 0, 1+len(body)), kindRaw), body...)
	}
	data := make([]byte, 1, 1+len(body)/2)
	data[0] = kindZstd
	data = s.enc.EncodeAll(body, data)
	if len(data) >= len(body)+1 {
		data = append(append(data[:0], kindRaw), body...)
	}
	return data
}

// PutEncoded stores a body given in the stored form (Encode) after
// decoding it, with at most maxBody bytes, and checking that it hashes to
// digest: ErrMismatch otherwise, also for a form that does not decode.
func (s *Store) PutEncoded(digest string, data []byte, maxBody int64) error {
	if !ValidDigest(digest) {
		return ErrBadDigest
	}
	body, err := s.decodeMax(data, maxBody)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMismatch, err)
	}
	if Digest(body) != digest {
		return ErrMismatch
	}
	return s.PutEncodedVerified(digest, data)
}

// PutEncodedVerified writes data, the stored form (Encode) of a body the
// caller has checked against digest.
func (s *Store) PutEncodedVerified(digest string, data []byte) error {
	return s.write(digest, data)
}

// write stores the concatenation of parts as digest's file.
func (s *Store) write(digest string, parts ...[]byte) error {
	if !ValidDigest(digest) {
		return ErrBadDigest
	}
	if digest == EmptyDigest {
		return nil
	}
	return s.writeDurably(s.path(digest), parts)
}

// writeDurably writes a temporary file, fsyncs it, renames it to path and
// fsyncs the directory.
func (s *Store) writeDurably(path string, parts [][]byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := s.writeTemp(dir, parts)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // no-op after the rename
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writeTemp writes the concatenation of parts to a new file in dir,
// fsynced, and returns its name. It writes past the page cache where the
// file system allows (direct_linux.go): a chunk is written once and read
// rarely, and buffered writes of three nodes' copies on one disk spend
// several times the CPU in the kernel (docs/benchmarks.md, "Chunks
// written past the page cache"). Once a file system refuses that, the
// store writes through the page cache.
func (s *Store) writeTemp(dir string, parts [][]byte) (string, error) {
	if !s.buffered.Load() {
		name, err := writeTempDirect(dir, parts)
		if !errors.Is(err, errNoDirect) {
			return name, err
		}
		if !s.buffered.Swap(true) {
			slog.Warn("chunk store: the file system refuses direct writes; writing chunks through the page cache",
				"dir", s.dir, "err", err)
		}
	}
	return writeTempBuffered(dir, parts)
}

// errNoDirect says the file system (or the platform) does not take
// direct writes.
var errNoDirect = errors.New("chunkstore: direct I/O not supported here")

func writeTempBuffered(dir string, parts [][]byte) (string, error) {
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", err
	}
	err = writeAll(tmp, parts)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

func writeAll(f *os.File, parts [][]byte) error {
	for _, p := range parts {
		if _, err := f.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// Get reads and verifies a body.
func (s *Store) Get(digest string) ([]byte, error) {
	if digest == EmptyDigest {
		return []byte{}, nil
	}
	if !ValidDigest(digest) {
		return nil, ErrBadDigest
	}
	data, err := os.ReadFile(s.path(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	body, err := s.decode(data)
	if err != nil || Digest(body) != digest {
		os.Remove(s.path(digest))
		return nil, fmt.Errorf("%w: %s", ErrCorrupt, digest)
	}
	return body, nil
}

// GetUnverified reads a body without hashing it: for a caller that hashes
// what it reads anyway and falls back to Get when that hash is not the one
// it expects (a publish's check of a whole artifact). A form that does not
// decode is ErrCorrupt, and the copy is left in place for Get to judge.
func (s *Store) GetUnverified(digest string) ([]byte, error) {
	if digest == EmptyDigest {
		return []byte{}, nil
	}
	if !ValidDigest(digest) {
		return nil, ErrBadDigest
	}
	data, err := os.ReadFile(s.path(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	body, err := s.decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrCorrupt, digest)
	}
	return body, nil
}

func (s *Store) decode(data []byte) ([]byte, error) { return s.decodeMax(data, -1) }

// decodeMax decodes a stored form; with maxBody >= 0 it refuses a body
// longer than that (before decoding all of it when the frame says so).
func (s *Store) decodeMax(data []byte, maxBody int64) ([]byte, error) {
	if len(data) == 0 {
		return nil, errUnknownKind
	}
	switch data[0] {
	case kindRaw:
		if maxBody >= 0 && int64(len(data)-1) > maxBody {
			return nil, errTooLarge
		}
		return data[1:], nil
	case kindZstd:
		if maxBody >= 0 {
			var h zstd.Header
			if err := h.Decode(data[1:]); err != nil {
				return nil, err
			}
			if !h.HasFCS || h.FrameContentSize > uint64(maxBody) {
				return nil, errTooLarge
			}
			body, err := s.dec.DecodeAll(data[1:], make([]byte, 0, h.FrameContentSize))
			if err == nil && int64(len(body)) > maxBody {
				err = errTooLarge
			}
			return body, err
		}
		return s.dec.DecodeAll(data[1:], nil)
	}
	return nil, errUnknownKind
}

// Remove deletes a body; a missing one is not an error.
func (s *Store) Remove(digest string) error {
	if !ValidDigest(digest) || digest == EmptyDigest {
		return nil
	}
	err := os.Remove(s.path(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Walk calls fn for every stored body with its file's modification time.
func (s *Store) Walk(fn func(digest string, mod time.Time)) error {
	return filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		if len(name) != 64 {
			return nil // temporary files
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		fn("sha256:"+name, info.ModTime())
		return nil
	})
}

// Usage counts the stored bodies and the bytes their files take (a walk of
// the store's directory).
func (s *Store) Usage() (count, bytes int64, err error) {
	err = filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || len(d.Name()) != 64 {
			return err
		}
		if info, err := d.Info(); err == nil {
			count++
			bytes += info.Size()
		}
		return nil
	})
	return count, bytes, err
}
