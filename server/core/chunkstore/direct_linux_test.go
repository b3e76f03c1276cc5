package chunkstore

import (
	"bytes"
	"math/rand"
	"os"
	"syscall"
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

// skipUnlessDirect skips a test on a file system not known to take
// O_DIRECT: others may refuse it, which the store then handles through
// the page cache (TestWritePathsKeepEveryByte covers both paths).
func skipUnlessDirect(t *testing.T, dir string) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	const ext4, xfs, btrfs = 0xEF53, 0x58465342, 0x9123683E
	switch uint32(st.Type) { // int32 on some platforms
	case ext4, xfs, btrfs:
	default:
		t.Skipf("the temporary directory's file system (magic %#x) is not one known to take O_DIRECT", st.Type)
	}
}

// On a file system known to take O_DIRECT, chunks are written past the
// page cache (the store does not fall back), whole and to the byte.
func TestDirectWritesWhereTheFileSystemTakesThem(t *testing.T) {
	dir := t.TempDir()
	skipUnlessDirect(t, dir)
	src := rand.New(rand.NewSource(3))
	for _, n := range []int{1, 4095, 4096, 4097, 1<<20 + 3} {
		head, body := []byte{kindRaw}, make([]byte, n)
		src.Read(body)
		name, err := writeTempDirect(dir, [][]byte{head, body})
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(head, body...)) {
			t.Fatalf("%d bytes: read back %d bytes, not the ones written", n, len(got))
		}
	}
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := []byte("direct")
	if err := s.Put(Digest(body), body); err != nil {
		t.Fatal(err)
	}
	if s.buffered.Load() {
		t.Error("the store fell back to writing through the page cache")
	}
}
