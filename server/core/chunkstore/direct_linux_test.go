package chunkstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
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

// On a file system known to take O_DIRECT, chunk files are read past the
// page cache (the store does not fall back), whole and to the byte,
// whatever their length and however they were written.
func TestDirectReadsWhereTheFileSystemTakesThem(t *testing.T) {
	dir := t.TempDir()
	skipUnlessDirect(t, dir)
	src := rand.New(rand.NewSource(4))
	for _, n := range []int{0, 1, 4095, 4096, 4097, 1<<20 + 3} {
		want := make([]byte, n)
		src.Read(want)
		name := filepath.Join(dir, fmt.Sprint(n))
		if err := os.WriteFile(name, want, 0o600); err != nil { // dirty in the page cache
			t.Fatal(err)
		}
		got, err := readFileDirect(name)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: read %d bytes, not the ones written", n, len(got))
		}
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(got))); n > 0 && p%directAlign != 0 {
			t.Fatalf("%d bytes: read into %#x, not a block boundary", n, p)
		}
	}
	if _, err := readFileDirect(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an absent file: got %v, want ErrNotExist", err)
	}
	direct := 0
	readDirect = func(name string) ([]byte, error) { direct++; return readFileDirect(name) }
	t.Cleanup(func() { readDirect = readFileDirect })
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := bytes.Repeat([]byte("direct read "), 1000)
	d := Digest(body)
	if err := s.Put(d, body); err != nil {
		t.Fatal(err)
	}
	for _, get := range []func(string) ([]byte, error){s.Get, s.GetUnverified} {
		if got, err := get(d); err != nil || !bytes.Equal(got, body) {
			t.Fatalf("read back %d bytes, %v; want the %d put", len(got), err, len(body))
		}
	}
	if s.cachedRead.Load() || direct != 1 {
		t.Errorf("%d direct reads of the store (want GetUnverified's one), fell back: %v", direct, s.cachedRead.Load())
	}
}

// chunkedReader hands out at most step bytes a read, then err at the end.
type chunkedReader struct {
	data []byte
	step int
	err  error // after the data; nil: io.EOF
	offs []int // the offset of each read
	at   int
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	r.offs = append(r.offs, r.at)
	if r.at == len(r.data) {
		if r.err != nil {
			return 0, r.err
		}
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.data[r.at:])
	r.at += n
	return n, nil
}

// readBlocks stops at a read that ends off a block boundary (the file's
// end, for O_DIRECT) without reading at an unaligned offset, goes on
// after whole blocks, reports a full buffer as such, and passes errors on
// with what it read.
func TestReadBlocks(t *testing.T) {
	data := make([]byte, 3*directAlign+100)
	rand.New(rand.NewSource(5)).Read(data)
	cases := []struct {
		name    string
		r       *chunkedReader
		buf     int
		want    int
		wantErr error
	}{
		{"one short read at the end", &chunkedReader{data: data, step: len(data)}, 4 * directAlign, len(data), nil},
		{"block by block", &chunkedReader{data: data, step: directAlign}, 4 * directAlign, len(data), nil},
		{"whole blocks then EOF", &chunkedReader{data: data[:2*directAlign], step: directAlign}, 3 * directAlign, 2 * directAlign, nil},
		{"a grown file fills the buffer", &chunkedReader{data: data, step: directAlign}, 2 * directAlign, 2 * directAlign, nil},
		{"an error after a block", &chunkedReader{data: data[:directAlign], step: directAlign, err: syscall.EINVAL}, 2 * directAlign, directAlign, syscall.EINVAL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, tc.buf)
			n, err := readBlocks(tc.r, buf)
			if n != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("got %d, %v; want %d, %v", n, err, tc.want, tc.wantErr)
			}
			if !bytes.Equal(buf[:n], data[:n]) {
				t.Fatal("the bytes read are not the file's")
			}
			for _, off := range tc.r.offs {
				if off%directAlign != 0 {
					t.Fatalf("a read at offset %d, off a block boundary (reads at %v)", off, tc.r.offs)
				}
			}
		})
	}
}
