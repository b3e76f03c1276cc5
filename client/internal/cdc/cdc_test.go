package cdc

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/iotest"
)

// TestMasks: the constants are the specification's rule, with 22 and 18 bits.
func TestMasks(t *testing.T) {
	if MaskS != Mask(22) || MaskL != Mask(18) {
		t.Fatalf("MaskS %#x, Mask(22) %#x; MaskL %#x, Mask(18) %#x", MaskS, Mask(22), MaskL, Mask(18))
	}
	if bits.OnesCount64(MaskS) != 22 || bits.OnesCount64(MaskL) != 18 || MaskS>>63 != 1 || MaskL>>63 != 1 {
		t.Fatalf("masks %#x %#x", MaskS, MaskL)
	}
}

// TestGearFirst pins the table's first entry, as the package doc gives it.
func TestGearFirst(t *testing.T) {
	if g := Gear(); g[0] != 0x075aefc5aefea201 || gear != g {
		t.Fatalf("G[0] = %#016x", g[0])
	}
}

// splitCut cuts data with Cut alone: the specification's loop.
func splitCut(data []byte) []int {
	var sizes []int
	for len(data) > 0 {
		n := Cut(data)
		sizes = append(sizes, n)
		data = data[n:]
	}
	return sizes
}

func splitStream(t *testing.T, r io.Reader) []int {
	t.Helper()
	c := NewChunker(r, nil)
	var sizes []int
	for {
		b, err := c.Next()
		if errors.Is(err, io.EOF) {
			return sizes
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Fatal("empty chunk")
		}
		sizes = append(sizes, len(b))
	}
}

// randReader hands out reads of random sizes, some of them empty.
type randReader struct {
	r   io.Reader
	rng *rand.Rand
}

func (r randReader) Read(p []byte) (int, error) {
	if r.rng.IntN(10) == 0 {
		return 0, nil
	}
	return r.r.Read(p[:min(len(p), 1+r.rng.IntN(3*MinSize))])
}

// TestChunkerMatchesCut: the streaming chunker makes the specification's
// cut whatever the reads' sizes, and its chunks stay within the bounds.
func TestChunkerMatchesCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 23<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	copy(data[5<<20:], make([]byte, 9<<20)) // a long run: MaxSize cuts
	want := splitCut(data)
	for i, n := range want {
		if n > MaxSize || (n <= MinSize && i != len(want)-1) {
			t.Fatalf("chunk %d has %d bytes", i, n)
		}
	}
	if len(want) < 10 {
		t.Fatalf("%d chunks", len(want))
	}
	for name, r := range map[string]io.Reader{
		"whole":        bytes.NewReader(data),
		"random reads": randReader{bytes.NewReader(data), rand.New(rand.NewPCG(3, 4))},
		"data+EOF":     iotest.DataErrReader(bytes.NewReader(data)),
	} {
		if got := splitStream(t, r); !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
}

// TestChunkerErrors: a read error is returned, and again after; a reader
// that never gives a byte is io.ErrNoProgress, not an endless loop.
func TestChunkerErrors(t *testing.T) {
	boom := errors.New("boom")
	c := NewChunker(io.MultiReader(bytes.NewReader(make([]byte, MinSize)), iotest.ErrReader(boom)), nil)
	for range 2 {
		if _, err := c.Next(); !errors.Is(err, boom) {
			t.Fatalf("got %v, want %v", err, boom)
		}
	}
	if _, err := NewChunker(iotest.ErrReader(nil), nil).Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("got %v, want io.ErrNoProgress", err)
	}
	c = NewChunker(bytes.NewReader(nil), nil)
	for range 2 {
		if b, err := c.Next(); len(b) != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("empty input: %d bytes, %v", len(b), err)
		}
	}
}
