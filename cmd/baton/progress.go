package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/client"
)

// progress draws a one-line transfer bar with throughput on stderr, when
// stderr is a terminal. A nil *progress draws nothing, so callers need not
// check.
type progress struct {
	w     io.Writer
	label string
	total int64 // -1: unknown
	start time.Time
	now   func() time.Time

	mu    sync.Mutex
	drawn time.Time // last draw
	done  int64
	// An upload's done bytes, split: sent, or skipped because the cluster
	// held their chunks (split is set by the first updateUpload).
	split         bool
	sent, skipped int64
}

// progressEvery is the least time between two draws.
const progressEvery = 100 * time.Millisecond

// isTerminal reports whether w is a character device (a terminal). Tests
// replace it.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newProgress returns a bar on a.stderr, or nil when it is not a terminal.
func (a *app) newProgress(label string, total int64) *progress {
	if !isTerminal(a.stderr) {
		return nil
	}
	return &progress{w: a.stderr, label: label, total: total, start: time.Now(), now: time.Now}
}

// update records done bytes and redraws at most every progressEvery. It is
// safe for concurrent use.
func (p *progress) update(done, total int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	if total >= 0 {
		p.total = total
	}
	if now := p.now(); now.Sub(p.drawn) >= progressEvery {
		p.drawn = now
		fmt.Fprintf(p.w, "\r%s\x1b[K", p.line(now))
	}
}

// updateUpload is update for an upload, whose bar also shows how many of
// the bytes done were sent and how many skipped.
func (p *progress) updateUpload(u client.UploadProgress) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.split, p.sent, p.skipped = true, u.Sent, u.Skipped
	p.mu.Unlock()
	p.update(u.Settled(), u.Total)
}

// finish draws the final state and ends the line.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r%s\x1b[K\n", p.line(p.now()))
}

// line renders "label [=====>     ]  45%  120.0/256.0 MiB  85.3 MB/s".
func (p *progress) line(now time.Time) string {
	var b strings.Builder
	b.WriteString(p.label)
	if p.total > 0 {
		const width = 30
		frac := min(float64(p.done)/float64(p.total), 1)
		fill := int(frac * width)
		bar := strings.Repeat("=", fill)
		if fill < width {
			bar += ">" + strings.Repeat(" ", width-fill-1)
		}
		fmt.Fprintf(&b, " [%s] %3.0f%%  %s/%s", bar, frac*100, mib(p.done), mib(p.total)+" MiB")
	} else {
		fmt.Fprintf(&b, "  %s MiB", mib(p.done))
	}
	if p.split {
		fmt.Fprintf(&b, "  sent %s MiB, skipped %s MiB (held)", mib(p.sent), mib(p.skipped))
	}
	fmt.Fprintf(&b, "  %s", throughput(p.done, now.Sub(p.start)))
	return b.String()
}

func mib(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }

// throughput is "85.3 MB/s" (decimal megabytes, as network rates go).
func throughput(n int64, d time.Duration) string {
	if d <= 0 {
		return "- MB/s"
	}
	return fmt.Sprintf("%.1f MB/s", float64(n)/1e6/d.Seconds())
}

// sizeText is "1073741824 bytes (1.0 GiB)".
func sizeText(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return fmt.Sprintf("%d bytes (%.1f %s)", n, v, units[u])
}

// progressWriter counts the bytes written through it into a bar.
type progressWriter struct {
	w     io.Writer
	p     *progress
	n     int64
	total int64
}

func (pw *progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	pw.n += int64(n)
	pw.p.update(pw.n, pw.total)
	return n, err
}
