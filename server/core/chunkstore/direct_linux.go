package chunkstore

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"unsafe"
)

// directAlign is the alignment O_DIRECT asks of the buffer's address, the
// file offset and the length: a multiple of every common logical block
// size (512, 4096).
const directAlign = 4096

// alignedBufs holds buffers whose first byte is directAlign-aligned, for
// reuse by the next write.
var alignedBufs sync.Pool

// writeTempDirect writes the concatenation of parts to a new file in dir
// with O_DIRECT, padded to whole blocks and truncated back to its length,
// then fsynced (the size and the blocks' allocation are metadata that
// O_DIRECT alone does not make durable). errNoDirect when the file system
// refuses O_DIRECT (EINVAL at open or at the write).
func writeTempDirect(dir string, parts [][]byte) (string, error) {
	name := filepath.Join(dir, ".tmp-"+rand.Text())
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_DIRECT, 0o600)
	if errors.Is(err, syscall.EINVAL) {
		return "", fmt.Errorf("%w: %v", errNoDirect, err)
	}
	if err != nil {
		return "", err
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	bp := alignedBuf((n + directAlign - 1) &^ (directAlign - 1))
	buf := *bp
	at := 0
	for _, p := range parts {
		at += copy(buf[at:], p)
	}
	clear(buf[n:])
	err = writeBlocks(f, buf, n)
	alignedBufs.Put(bp)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		if errors.Is(err, syscall.EINVAL) {
			return "", fmt.Errorf("%w: %v", errNoDirect, err)
		}
		return "", err
	}
	return name, nil
}

func writeBlocks(f *os.File, buf []byte, n int) error {
	if len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			return err
		}
	}
	if len(buf) != n {
		if err := f.Truncate(int64(n)); err != nil {
			return err
		}
	}
	return f.Sync()
}

// readFileDirect reads a whole file with O_DIRECT into a new aligned
// buffer (the caller keeps it: a body may alias it). errNoDirect when the
// file system refuses O_DIRECT for the file.
func readFileDirect(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_DIRECT, 0)
	if errors.Is(err, syscall.EINVAL) {
		return nil, fmt.Errorf("%w: %v", errNoDirect, err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// One block more than the size: a file that grew since the stat fills
	// the buffer, and is read again through the page cache.
	buf := newAligned((int(st.Size()) + directAlign) &^ (directAlign - 1))
	n, err := readBlocks(f, buf)
	switch {
	case errors.Is(err, syscall.EINVAL) && n == 0:
		return nil, fmt.Errorf("%w: %v", errNoDirect, err)
	case errors.Is(err, syscall.EINVAL) || err == nil && n == len(buf):
		// Refused past the first block, or grown: this file only.
		return os.ReadFile(name)
	case err != nil:
		return nil, err
	}
	return buf[:n], nil
}

// readBlocks reads r into buf, which is whole blocks, until the end of
// the file: a read that ends off a block boundary (O_DIRECT reads whole
// blocks, and only the file's end is shorter) or one that returns
// nothing. It never reads at an offset off a block boundary.
func readBlocks(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		switch {
		case err == io.EOF || err == nil && (k == 0 || n%directAlign != 0):
			return n, nil
		case err != nil:
			return n, err
		}
	}
	return n, nil
}

// alignedBuf returns a pooled or new buffer of length n whose first byte
// is directAlign-aligned.
func alignedBuf(n int) *[]byte {
	if bp, ok := alignedBufs.Get().(*[]byte); ok && cap(*bp) >= n {
		*bp = (*bp)[:n]
		return bp
	}
	b := newAligned(n)
	return &b
}

// newAligned returns a new buffer of length n whose first byte is
// directAlign-aligned.
func newAligned(n int) []byte {
	raw := make([]byte, n+directAlign)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & (directAlign - 1)); r != 0 {
		off = directAlign - r
	}
	return raw[off : off+n : off+n]
}
