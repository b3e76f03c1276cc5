package chunkstore

import (
	"testing"
	"unsafe"
)

// A direct write's buffer starts on a block boundary, pooled or new, and
// has the length asked for.
func TestAlignedBuf(t *testing.T) {
	for _, n := range []int{0, 1, directAlign, 3*directAlign + 7, 5 << 20} {
		for range 2 { // new, then from the pool
			bp := alignedBuf(n)
			if len(*bp) != n {
				t.Fatalf("alignedBuf(%d): length %d", n, len(*bp))
			}
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(*bp))); p%directAlign != 0 {
				t.Fatalf("alignedBuf(%d) at %#x, want a multiple of %d", n, p, directAlign)
			}
			alignedBufs.Put(bp)
		}
	}
}
