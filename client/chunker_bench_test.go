package client_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/baton-dev/baton/client"
)

// BenchmarkSplit cuts 64 MiB of pseudo-random bytes into chunks
// (docs/benchmarks.md "Chunking" has the figures).
func BenchmarkSplit(b *testing.B) {
	data := make([]byte, 64<<20)
	_, _ = rand.NewChaCha8([32]byte{'b', 'a', 't', 'o', 'n'}).Read(data)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		n := 0
		if err := client.SplitChunks(bytes.NewReader(data), func(c []byte) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			b.Fatal("no chunks")
		}
	}
}
