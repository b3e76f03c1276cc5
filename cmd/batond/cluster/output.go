package cluster

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
)

// lineWriter copies whole lines to a shared writer, each prefixed with the
// node id, so the output of several nodes interleaves by line, not by byte.
type lineWriter struct {
	mu     *sync.Mutex // shared by every node's lineWriter
	w      io.Writer
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i+1])
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// Flush writes a last line that had no newline.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(append(l.buf, '\n'))
		l.buf = nil
	}
}

// emit ignores the writer's errors: losing a copy of a line that is also in
// the log file must not stop the node.
func (l *lineWriter) emit(line []byte) {
	_, _ = io.WriteString(l.w, l.prefix+string(line))
}

// tailLines returns at most n last lines of the file at path, reading no
// more than its last 16 KiB.
func tailLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	const maxRead = 16 << 10
	var off int64
	if st, err := f.Stat(); err == nil && st.Size() > maxRead {
		off = st.Size() - maxRead
	}
	buf := make([]byte, maxRead)
	k, _ := f.ReadAt(buf, off)
	lines := strings.Split(strings.TrimRight(string(buf[:k]), "\n"), "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // the first line was cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
