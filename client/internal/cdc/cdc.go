// Package cdc is Baton's content-defined chunking: the cut of artifact
// content into chunks that every SDK (Go, Python, TypeScript) makes byte for
// byte alike, so that equal content gives equal chunks whichever SDK
// uploaded it. This comment is the specification; the shared vectors in
// testdata/chunking/vectors.json pin it down, and each SDK's tests read them.
//
// The algorithm is FastCDC (gear hash, normalized chunking at level 2) with
// Baton's own gear table and masks.
//
// # Parameters
//
//	MinSize    =   262144 bytes (256 KiB)
//	NormalSize =  1048576 bytes (1 MiB) = 2^b with b = 20
//	MaxSize    =  4194304 bytes (4 MiB), also the server's limit on one chunk
//
// # Gear table
//
// For i in 0..255, G[i] is the first 8 bytes of
// SHA-256("baton-cdc-gear-v1" || byte(i)) read as a little-endian uint64:
// the hashed message is the 17 ASCII bytes of the label followed by the one
// byte i (18 bytes). G[0] = 0x075aefc5aefea201.
//
// # Masks
//
// A mask with n one-bits has bit 63 - floor(j*64/n) set for j = 0..n-1 (bit
// 0 is the least significant): n bits spread evenly over the word, the
// highest bit first. MaskS ("small", harder to match) has b+2 = 22 bits and
// MaskL ("large", easier) has b-2 = 18:
//
//	MaskS = 0xa4924924a4924924
//	MaskL = 0x9122448891224488
//
// # Cutting
//
// The input is cut from its start. Each chunk's length is Cut(rest), where
// rest is the part of the input not yet cut; the chunks, in order, join up
// to the input. An empty input has no chunk. All arithmetic is on uint64,
// wrapping modulo 2^64:
//
//	Cut(data):
//	    limit = min(len(data), MaxSize)
//	    fp = 0
//	    for i = MinSize; i < limit; i++:
//	        fp = (fp << 1) + G[data[i]]
//	        mask = MaskS if i < NormalSize else MaskL
//	        if fp & mask == 0:
//	            return i + 1   // the byte at i is the chunk's last byte
//	    return limit
//
// So the first MinSize bytes of a chunk are never hashed (fp starts at zero
// with the chunk's byte at index MinSize); the byte whose hash matches ends
// the chunk (the cut is after it); a rest of at most MinSize bytes, or one
// of at most MaxSize bytes without a match, is the last chunk whole; and no
// chunk is longer than MaxSize. Every chunk but the last has more than
// MinSize bytes.
package cdc

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
)

// The parameters and masks of the specification above.
const (
	MinSize    = 256 << 10
	NormalSize = 1 << 20
	MaxSize    = 4 << 20

	MaskS uint64 = 0xa4924924a4924924 // 22 bits: Mask(22)
	MaskL uint64 = 0x9122448891224488 // 18 bits: Mask(18)

	// GearLabel prefixes the byte i in the message hashed for G[i].
	GearLabel = "baton-cdc-gear-v1"
)

// gear is the table G of the specification.
var gear = Gear()

// Gear returns the gear table: G[i] = little-endian uint64 of the first 8
// bytes of SHA-256(GearLabel || byte(i)).
func Gear() [256]uint64 {
	var g [256]uint64
	msg := []byte(GearLabel + "\x00")
	for i := range g {
		msg[len(msg)-1] = byte(i)
		sum := sha256.Sum256(msg)
		g[i] = binary.LittleEndian.Uint64(sum[:8])
	}
	return g
}

// Mask returns the mask with n one-bits: bit 63 - floor(j*64/n) for
// j = 0..n-1.
func Mask(n int) uint64 {
	var m uint64
	for j := range n {
		m |= 1 << (63 - j*64/n)
	}
	return m
}

// Cut returns the length of the first chunk of data, which holds the rest
// of the input, or at least its next MaxSize bytes. It is 0 only for empty
// data.
func Cut(data []byte) int {
	limit := min(len(data), MaxSize)
	if n, _ := scan(data[:limit], MinSize, 0); n > 0 {
		return n
	}
	return limit
}

// scan goes on with the search for a cut over data (the chunk's bytes from
// its start, at most MaxSize of them) at index i with fingerprint fp. It
// returns the chunk's length, or 0 and the fingerprint after the last byte
// when data ends first.
func scan(data []byte, i int, fp uint64) (int, uint64) {
	if i < NormalSize {
		end := min(len(data), NormalSize)
		if i < end {
			k, f := search(data[i:end], fp, MaskS)
			if k > 0 {
				return i + k, f
			}
			i, fp = end, f
		}
	}
	if i < len(data) {
		k, f := search(data[i:], fp, MaskL)
		if k > 0 {
			return i + k, f
		}
		fp = f
	}
	return 0, fp
}

// search hashes s into fp from its first byte and returns the length of
// the prefix that ends at the first match of mask, or 0 and the fingerprint
// after all of s. It takes two bytes a step: the fingerprint two bytes on,
// fp<<2 + (G[a]<<1 + G[b]), is one dependent add away, and the one between
// (fp<<1 + G[a], to be checked too) is off that path.
func search(s []byte, fp, mask uint64) (int, uint64) {
	k := 0
	for ; k+1 < len(s); k += 2 {
		ga, gb := gear[s[k]], gear[s[k+1]]
		mid := fp<<1 + ga
		fp = fp<<2 + (ga<<1 + gb)
		if mid&mask == 0 {
			return k + 1, mid
		}
		if fp&mask == 0 {
			return k + 2, fp
		}
	}
	if k < len(s) {
		fp = fp<<1 + gear[s[k]]
		if fp&mask == 0 {
			return k + 1, fp
		}
	}
	return 0, fp
}

// maxEmptyReads is how many reads in a row may return no byte and no error
// before Next gives up with io.ErrNoProgress (as bufio does).
const maxEmptyReads = 100

// Chunker cuts a stream into the chunks of the specification. Its memory is
// its scan buffer of MaxSize bytes, whatever the stream's length; each byte
// is hashed once, and the bytes of a chunk that straddles the buffer's end
// are moved to its front once.
type Chunker struct {
	r          io.Reader
	buf        []byte
	start, end int // buf[start:end]: read, not yet handed out
	eof        bool
	err        error // sticky: io.EOF after the last chunk, or the read error
}

// NewChunker returns a Chunker reading r. buf is its scan buffer, of at
// least MaxSize bytes (only the first MaxSize are used); nil allocates one.
func NewChunker(r io.Reader, buf []byte) *Chunker {
	if len(buf) < MaxSize {
		buf = make([]byte, MaxSize)
	}
	return &Chunker{r: r, buf: buf[:MaxSize]}
}

// Next returns the next chunk, which aliases the scan buffer and is valid
// only until the following call; io.EOF after the last one. It never returns
// an empty chunk. A read error other than io.EOF is returned as it is, and
// again on every later call.
func (c *Chunker) Next() ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	i, fp := MinSize, uint64(0) // the search's state, kept across reads
	for {
		avail := c.end - c.start
		if avail >= MaxSize || c.eof { // the chunk's bytes are all here
			limit := min(avail, MaxSize)
			if limit == 0 {
				c.err = io.EOF
				return nil, io.EOF
			}
			n, _ := scan(c.buf[c.start:c.start+limit], i, fp)
			if n == 0 {
				n = limit
			}
			return c.take(n), nil
		}
		if i < avail {
			n, f := scan(c.buf[c.start:c.end], i, fp)
			if n > 0 {
				return c.take(n), nil
			}
			i, fp = avail, f
		}
		if err := c.fill(); err != nil {
			c.err = err
			return nil, err
		}
	}
}

// take hands out the next n bytes.
func (c *Chunker) take(n int) []byte {
	b := c.buf[c.start : c.start+n : c.start+n]
	c.start += n
	return b
}

// fill reads once more into the buffer, first moving the unfinished chunk
// to its front when the buffer is full. A short read is fine: Next scans
// what came and reads again.
func (c *Chunker) fill() error {
	if c.end == len(c.buf) {
		c.end = copy(c.buf, c.buf[c.start:c.end])
		c.start = 0
	}
	for range maxEmptyReads {
		n, err := c.r.Read(c.buf[c.end:])
		if n < 0 || n > len(c.buf)-c.end {
			return errors.New("cdc: reader returned an invalid count")
		}
		c.end += n
		if errors.Is(err, io.EOF) {
			c.eof = true
			return nil
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
	return io.ErrNoProgress
}
