package cdc

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkCut is the search alone over 64 MiB of pseudo-random bytes
// (client's BenchmarkSplit measures the whole streaming path).
func BenchmarkCut(b *testing.B) {
	data := make([]byte, 64<<20)
	_, _ = rand.NewChaCha8([32]byte{'b', 'a', 't', 'o', 'n'}).Read(data)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		for d := data; len(d) > 0; {
			d = d[Cut(d):]
		}
	}
}
