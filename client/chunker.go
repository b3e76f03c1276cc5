package client

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	chunkers "github.com/PlakarKorp/go-cdc-chunkers"
	_ "github.com/PlakarKorp/go-cdc-chunkers/chunkers/fastcdc" // registers "fastcdc-v1.0.0"
)

// Content-defined chunking parameters (docs/design.md "Chunks beside the log").
// ChunkMaxSize is also the server's default limit on one chunk body.
const (
	ChunkMinSize  = 256 << 10
	ChunkAvgSize  = 1 << 20
	ChunkMaxSize  = 4 << 20
	fastcdcScheme = "fastcdc-v1.0.0" // FastCDC with masks derived from ChunkAvgSize, normalization level 2
)

// Digest returns the digest of b as the API writes it: "sha256:<64 hex>".
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// chunker cuts a stream into content-defined chunks. Its memory is one scan
// buffer of ChunkMaxSize bytes, whatever the stream's length.
type chunker struct {
	c *chunkers.Chunker
}

func newChunker(r io.Reader) (*chunker, error) {
	opts := &chunkers.ChunkerOpts{MinSize: ChunkMinSize, NormalSize: ChunkAvgSize, MaxSize: ChunkMaxSize}
	c, err := chunkers.NewChunkerBuffer(fastcdcScheme, r, opts, make([]byte, ChunkMaxSize))
	if err != nil {
		return nil, fmt.Errorf("client: fastcdc: %w", err)
	}
	return &chunker{c: c}, nil
}

// next returns the next chunk, which aliases the scan buffer and is valid
// only until the following call; io.EOF after the last one. It never
// returns an empty chunk.
func (ch *chunker) next() ([]byte, error) {
	if ch.c == nil {
		return nil, io.EOF
	}
	data, err := ch.c.Next()
	switch {
	case errors.Is(err, io.EOF):
		ch.c = nil // the library hands out the final chunk together with io.EOF
		if len(data) == 0 {
			return nil, io.EOF
		}
		return data, nil
	case err != nil:
		ch.c = nil
		return nil, err
	case len(data) == 0: // defensive: the library does not do this
		ch.c = nil
		return nil, io.EOF
	}
	return data, nil
}

// SplitChunks cuts r into the chunks UploadArtifact would upload and calls
// fn with each, in order. The slice passed to fn is reused after fn returns.
// It is the same cut as an upload's: two inputs that share long runs of
// bytes share most chunks (and so most uploads).
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
