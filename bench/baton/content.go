package baton

import (
	"io"
	"math/rand/v2"
)

// Text streams n bytes of text-like content, the artifacts workload's:
// words from a vocabulary drawn from seed, with punctuation and line
// breaks. With patchAt >= 0, the PatchSize bytes from patchAt on come from
// another seed instead (the same length).
type Text struct {
	rng, patch *textGen
	n, pos     int64
	patchAt    int64
}

// NewText returns the content of seed, n bytes long, patched at patchAt
// (-1: nowhere).
func NewText(seed uint64, n, patchAt int64) *Text {
	return &Text{rng: newTextGen(seed, seed), patch: newTextGen(seed+1, seed^0xfeed), n: n, patchAt: patchAt}
}

// PatchSize is how much of a Text NewText's patchAt replaces.
const PatchSize = 1 << 20

// Read fills p with the next bytes of the content.
func (t *Text) Read(p []byte) (int, error) {
	if t.pos >= t.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), t.n-t.pos)]
	t.rng.fill(p)
	if t.patchAt >= 0 {
		lo, hi := max(t.pos, t.patchAt), min(t.pos+int64(len(p)), t.patchAt+PatchSize)
		if lo < hi {
			t.patch.fill(p[lo-t.pos : hi-t.pos])
		}
	}
	t.pos += int64(len(p))
	return len(p), nil
}

// textGen emits words without end; fill continues where the last one
// stopped, so the stream does not depend on how it is read.
type textGen struct {
	rng     *rand.Rand
	words   [][]byte
	buf     []byte // the rest of the current word
	scratch []byte
}

func newTextGen(vocabSeed, streamSeed uint64) *textGen {
	v := rand.New(rand.NewPCG(vocabSeed, 1))
	words := make([][]byte, 4096)
	for i := range words {
		w := make([]byte, 2+v.IntN(9))
		for j := range w {
			w[j] = 'a' + byte(v.IntN(26))
		}
		words[i] = w
	}
	return &textGen{rng: rand.New(rand.NewPCG(streamSeed, 2)), words: words}
}

func (g *textGen) fill(p []byte) {
	for len(p) > 0 {
		if len(g.buf) == 0 {
			g.buf = g.nextWord()
		}
		n := copy(p, g.buf)
		p, g.buf = p[n:], g.buf[n:]
	}
}

func (g *textGen) nextWord() []byte {
	u := g.rng.Uint64()
	// A Zipf-like choice: frequent short words, a long tail.
	idx := int(u%4096) >> (u >> 60 % 5)
	w := append(g.scratch[:0], g.words[idx]...)
	g.scratch = w
	switch u >> 56 & 31 {
	case 0:
		return append(w, ".\n"...)
	case 1, 2:
		return append(w, ", "...)
	}
	return append(w, ' ')
}
