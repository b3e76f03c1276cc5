package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Black-box tests of the edge: what a node does with requests it must
// refuse, measured on real batond processes.

// edgeRSS is the resident set size of process pid in bytes (Linux).
func edgeRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc status for pid %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// edgeRawPost sends a POST with a declared body of size bytes over a fresh
// connection, writing the body in the background (slowly when pace > 0:
// 64 KiB per pace), and returns the status of the answer and how long it
// took from the end of the headers.
func edgeRawPost(addr, path, token string, size int, pace time.Duration) (int, time.Duration, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	hdr := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		path, addr, token, size)
	if _, err := io.WriteString(conn, hdr); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	go func() {
		chunk := bytes.Repeat([]byte{' '}, 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := conn.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
				return // the server answered and closed: expected
			}
			if pace > 0 {
				time.Sleep(pace)
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, time.Since(start), err
	}
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), nil
}

// TestEdgeUnauthenticatedBodiesToFollower: 100 requests with an unknown
// token, each declaring a 4 MiB body, sent at once to a follower, fast or
// slowly, are refused with 401 promptly and leave the follower's memory
// where it was: the follower authenticates before it reads a body.
func TestEdgeUnauthenticatedBodiesToFollower(t *testing.T) {
	c := startCluster(t, 3)
	ctx := ctxFor(t, 120*time.Second)
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin := adminClient(t, c)
	if _, err := admin.PutTenant(ctx, "edge"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % 3
	pid := c.PID(follower)
	for _, pace := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(fmt.Sprintf("pace=%v", pace), func(t *testing.T) {
			before := edgeRSS(t, pid)
			var (
				mu    sync.Mutex
				worst time.Duration
				bad   []string
				peak  = before
				wg    sync.WaitGroup
				stop  = make(chan struct{})
			)
			go func() { // sample the follower's RSS while the requests run
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					rss := edgeRSS(t, pid)
					mu.Lock()
					peak = max(peak, rss)
					mu.Unlock()
				}
			}()
			for i := range 100 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					status, took, err := edgeRawPost(c.HTTPAddr(follower), "/v1/tenants/edge/tasks",
						fmt.Sprintf("btk_not-a-token-%d", i), 4<<20, pace)
					mu.Lock()
					defer mu.Unlock()
					worst = max(worst, took)
					if err != nil || status != http.StatusUnauthorized {
						bad = append(bad, fmt.Sprintf("request %d: status %d err %v", i, status, err))
					}
				}()
			}
			wg.Wait()
			close(stop)
			after := edgeRSS(t, pid)
			mu.Lock()
			defer mu.Unlock()
			t.Logf("follower RSS before %d KiB, peak %d KiB, after %d KiB; slowest 401 after %v",
				before>>10, peak>>10, after>>10, worst)
			if len(bad) > 0 {
				t.Errorf("%d of 100 requests were not answered 401: %v", len(bad), bad[:min(5, len(bad))])
			}
			if worst > 3*time.Second {
				t.Errorf("slowest answer took %v; want 401 before the body is read", worst)
			}
			if grew := peak - before; grew > 8<<20 {
				t.Errorf("follower RSS grew by %d MiB (before %d MiB, peak %d MiB); want within a few MiB",
					grew>>20, before>>20, peak>>20)
			}
		})
	}
}
