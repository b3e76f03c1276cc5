// Package pyrun runs one of the suite's Python load drivers (bench/python:
// sdkbench.py, lgbench.py) and reads the run it measured: the driver writes
// one bench/result.Run as a line of JSON on stdout, its progress on stderr.
// Both the driver (bench/cmd/bench) and the peers' program (PostgreSQL's
// LangGraph saver) use it. It imports only the standard library and
// bench/result.
package pyrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"

	"github.com/baton-dev/baton/bench/result"
)

// Run runs python script args..., its stderr copied to stderr, and returns
// the run from the last line of its stdout. A driver that exits with an
// error returns it with the last lines it printed.
func Run(ctx context.Context, python, script string, args []string, stderr io.Writer) (*result.Run, error) {
	var out, errTail bytes.Buffer
	cmd := exec.CommandContext(ctx, python, append([]string{script}, args...)...)
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(stderr, &tail{b: &errTail, max: 4096})
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", python, script, err, strings.TrimSpace(errTail.String()))
	}
	return Decode(out.Bytes())
}

// Decode reads the run from a driver's stdout: the last non-empty line,
// one JSON object with at least the workload and a latency histogram.
func Decode(stdout []byte) (*result.Run, error) {
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return nil, errors.New("pyrun: the driver printed no run")
	}
	var r result.Run
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		return nil, fmt.Errorf("pyrun: decode the driver's run: %w", err)
	}
	if r.Workload == "" || r.Latency == nil {
		return nil, fmt.Errorf("pyrun: the driver's run has no workload or latency: %.200s", last)
	}
	return &r, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	b   *bytes.Buffer
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}
