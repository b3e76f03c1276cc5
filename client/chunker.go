package client

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"

	"github.com/baton-dev/baton/client/internal/cdc"
)

// Content-defined chunking parameters (docs/design.md "Chunks beside the
// log"; the cut itself is specified in client/internal/cdc). ChunkMaxSize is
// also the server's default limit on one chunk body.
const (
	ChunkMinSize = cdc.MinSize
	ChunkAvgSize = cdc.NormalSize
	ChunkMaxSize = cdc.MaxSize
)

// Digest returns the digest of b as the API writes it: "sha256:<64 hex>".
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// chunker cuts a stream into content-defined chunks. Its memory is one scan
// buffer of ChunkMaxSize bytes, whatever the stream's length.
type chunker struct {
	c *cdc.Chunker
}

func newChunker(r io.Reader) (*chunker, error) {
	return &chunker{c: cdc.NewChunker(r, make([]byte, ChunkMaxSize))}, nil
}

// next returns the next chunk, which aliases the scan buffer and is valid
// only until the following call; io.EOF after the last one. It never
// returns an empty chunk.
func (ch *chunker) next() ([]byte, error) {
	return ch.c.Next()
}

// SplitChunks cuts r into the chunks UploadArtifact would upload and calls
// fn with each, in order. The slice passed to fn is reused after fn returns.
// It is the same cut as an upload's, and as every Baton SDK's: two inputs
// that share long runs of bytes share most chunks (and so most uploads).
func SplitChunks(r io.Reader, fn func(chunk []byte) error) error {
	ch, err := newChunker(r)
	if err != nil {
		return err
	}
	for {
		data, err := ch.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(data); err != nil {
			return err
		}
	}
}
