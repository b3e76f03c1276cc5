package chunkstore

import (
	"crypto/rand"
	"errors"
	"fmt"
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

// alignedBuf returns a pooled or new buffer of length n whose first byte
// is directAlign-aligned.
func alignedBuf(n int) *[]byte {
	if bp, ok := alignedBufs.Get().(*[]byte); ok && cap(*bp) >= n {
		*bp = (*bp)[:n]
		return bp
	}
	raw := make([]byte, n+directAlign)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & (directAlign - 1)); r != 0 {
		off = directAlign - r
	}
	b := raw[off : off+n]
	return &b
}
