package cluster

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newFake builds a Cluster of fake batond processes (the test binary itself)
// closed at the end of the test.
func newFake(t *testing.T, nodes int, env ...string) *Cluster {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{
		Binary:      self,
		Nodes:       nodes,
		BaseDir:     t.TempDir(),
		Env:         append([]string{fakeEnv + "=1"}, env...),
		StopTimeout: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func wantLeader(t *testing.T, c *Cluster, want int) {
	t.Helper()
	got, err := c.WaitLeader(ctxFor(t, 5*time.Second))
	if err != nil {
		t.Fatalf("WaitLeader: %v", err)
	}
	if got != want {
		t.Fatalf("WaitLeader = %s, want %s", c.ID(got), c.ID(want))
	}
}

func starts(t *testing.T, c *Cluster, i int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.DataDir(i), "starts"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// reaped reports whether pid is gone, not even a zombie.
func reaped(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

func TestFakeLifecycle(t *testing.T) {
	c := newFake(t, 3)
	if err := c.Start(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	wantLeader(t, c, 0)
	for i := range 3 {
		if err := c.WaitReady(ctxFor(t, 5*time.Second), i); err != nil {
			t.Fatalf("WaitReady(%d): %v", i, err)
		}
	}
	if idx, err := c.WaitConverged(ctxFor(t, 5*time.Second)); err != nil || idx != 5 {
		t.Fatalf("WaitConverged = %d, %v; want 5, nil", idx, err)
	}

	pid := c.PID(0)
	if err := c.Kill(0); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if !reaped(pid) {
		t.Errorf("pid %d not reaped after Kill", pid)
	}
	if err := c.Kill(0); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second Kill = %v, want ErrNotRunning", err)
	}
	wantLeader(t, c, 1)
	if err := c.Restart(ctxFor(t, 5*time.Second), 0); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := c.Restart(ctxFor(t, 5*time.Second), 0); !errors.Is(err, ErrRunning) {
		t.Errorf("Restart of a running node = %v, want ErrRunning", err)
	}
	if got := starts(t, c, 0); got != "peers\npeers" {
		t.Errorf("n1 starts = %q, want two bootstrap starts on the same data", got)
	}
	wantLeader(t, c, 0)

	if err := c.Pause(0); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if c.Live(0) || !c.Running(0) {
		t.Errorf("paused n1: Live=%v Running=%v, want false, true", c.Live(0), c.Running(0))
	}
	wantLeader(t, c, 1)
	if err := c.Resume(0); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	wantLeader(t, c, 0)

	if err := c.Wipe(1); err != nil {
		t.Fatalf("Wipe: %v", err)
	}
	if got := starts(t, c, 1); got != "" {
		t.Errorf("wiped n2 starts = %q, want no data", got)
	}
	if err := c.StartJoin(ctxFor(t, 5*time.Second), 1, c.URL(0)); err != nil {
		t.Fatalf("StartJoin: %v", err)
	}
	if err := c.StopNode(1); err != nil {
		t.Fatalf("StopNode: %v", err)
	}
	if err := c.Restart(ctxFor(t, 5*time.Second), 1); err != nil {
		t.Fatalf("Restart after join: %v", err)
	}
	if got := starts(t, c, 1); got != "join\njoin" {
		t.Errorf("n2 starts = %q, want two joins", got)
	}
	log, err := os.ReadFile(c.LogPath(1))
	if err != nil || !strings.Contains(string(log), "--join="+c.URL(0)) || !strings.Contains(string(log), "fake batond stopped cleanly") {
		t.Errorf("n2 log lacks the join start or the clean stop:\n%s", log)
	}

	select {
	case e := <-c.Exits():
		t.Errorf("unexpected Exit %v after harness-driven exits only", e)
	default:
	}
	pids := []int{c.PID(0), c.PID(1), c.PID(2)}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for i, pid := range pids {
		if !reaped(pid) {
			t.Errorf("%s (pid %d) not reaped after Close", c.ID(i), pid)
		}
	}
	if err := c.Restart(ctxFor(t, time.Second), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Restart after Close = %v, want ErrClosed", err)
	}
}

func TestFakeUnexpectedExitIsReported(t *testing.T) {
	c := newFake(t, 3)
	if err := c.Start(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := syscall.Kill(c.PID(2), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-c.Exits():
		if e.Node != 2 || e.ID != "n3" || e.Err == nil || e.LogPath != c.LogPath(2) {
			t.Errorf("Exit = %+v, want n3 killed, log %s", e, c.LogPath(2))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Exit for a node killed behind the harness's back")
	}
	if c.Running(2) {
		t.Error("n3 still Running after its exit was reported")
	}
}

func TestFakeEarlyExitFailsStart(t *testing.T) {
	c := newFake(t, 3, "FAKE_EXIT=n2")
	err := c.Start(ctxFor(t, 10*time.Second))
	if !errors.Is(err, ErrExited) {
		t.Fatalf("Start = %v, want ErrExited", err)
	}
	for _, want := range []string{"n2", "exit status 3", "fatal: fake failure for n2", c.LogPath(1)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start error lacks %q:\n%v", want, err)
		}
	}
	for i := range 3 {
		if c.Running(i) {
			t.Errorf("%s still running after a failed Start", c.ID(i))
		}
	}
}

func TestStartFailsOnBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	free, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	c, err := New(Config{Binary: self, BaseDir: t.TempDir(), HTTPPorts: []int{free[0], busy, free[1]}, Env: []string{fakeEnv + "=1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Start(ctxFor(t, 5*time.Second))
	if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), "port "+strconv.Itoa(busy)+" (n2 http)") {
		t.Fatalf("Start = %v, want ErrPortInUse naming port %d (n2 http)", err, busy)
	}
	if c.Running(0) {
		t.Error("n1 started although a port was busy")
	}
}

func TestFakeDivergenceFailsAtOnce(t *testing.T) {
	c := newFake(t, 3, "FAKE_DIVERGE=n2")
	if err := c.Start(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	start := time.Now()
	_, err := c.WaitConverged(ctxFor(t, 10*time.Second))
	if !errors.Is(err, ErrDiverged) {
		t.Fatalf("WaitConverged = %v, want ErrDiverged", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("divergence reported after %v, want at once", d)
	}
}

func TestFakeConvergeTimeoutShowsEachNode(t *testing.T) {
	c := newFake(t, 3, "FAKE_LAG=n3")
	if err := c.Start(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	_, err := c.WaitConverged(ctxFor(t, 300*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitConverged = %v, want DeadlineExceeded", err)
	}
	for _, want := range []string{"n1: Leader", "applied=5", "n3: Follower", "applied=4", "digest=sha256:same"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("timeout error lacks %q: %v", want, err)
		}
	}
	if _, err := c.WaitConverged(ctxFor(t, 5*time.Second), 0, 1); err != nil {
		t.Errorf("WaitConverged(n1, n2) = %v, want nil", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the nodes' concurrent output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestFakeOutputIsPrefixedByNode(t *testing.T) {
	var out syncBuffer
	self, _ := os.Executable()
	c, err := New(Config{Binary: self, Nodes: 1, BaseDir: t.TempDir(), Env: []string{fakeEnv + "=1"}, Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, want := range []string{"n1| fake batond n1 starting\n", "n1| fake batond stopped cleanly\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestStatusNeedsTheAdminToken(t *testing.T) {
	c := newFake(t, 1)
	if err := c.Start(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	c.token = "wrong"
	_, err := c.Status(ctxFor(t, 5*time.Second), 0)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Status with a wrong token = %v, want a 401 error", err)
	}
}
