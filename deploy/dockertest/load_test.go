package dockertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

const loadTenant, loadNS = "deploy", "load"

// load writes distinct keys from a few workers until stopped, keeping every
// write the cluster acknowledged and counting the ones it did not.
type load struct {
	c      *client.Client
	prefix string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	acked  map[string]string // key -> value
	failed []error
}

func startLoad(c *client.Client, prefix string, workers int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{c: c, prefix: prefix, cancel: cancel, acked: map[string]string{}}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("%s-w%d-%06d", prefix, w, i)
				val := strconv.Quote(key)
				_, err := c.PutKV(ctx, loadTenant, loadNS, key, client.PutKVRequest{Value: json.RawMessage(val)})
				l.mu.Lock()
				switch {
				case err == nil:
					l.acked[key] = val
				case ctx.Err() == nil:
					l.failed = append(l.failed, fmt.Errorf("%s: %w", key, err))
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// stop ends the load; it returns the acknowledged writes and the failures.
func (l *load) stop() (map[string]string, []error) {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked, l.failed
}

// count is how many writes have been acknowledged so far.
func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// waitAcked waits until n more writes are acknowledged (the load is
// flowing).
func (l *load) waitAcked(t *testing.T, n int, within time.Duration) {
	t.Helper()
	want := l.count() + n
	deadline := time.Now().Add(within)
	for l.count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("load: %d writes acknowledged, want %d within %v", l.count(), want, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkAcked reads the whole load namespace (linearizable reads through
// the leader) and fails the test for every acknowledged write missing or
// changed.
func checkAcked(t *testing.T, c *client.Client, acked map[string]string) {
	t.Helper()
	got := map[string]string{}
	page := ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		l, err := c.ListKV(ctx, loadTenant, loadNS, client.ListKVOptions{Limit: 1000, PageToken: page})
		cancel()
		if err != nil {
			t.Fatalf("list %s/%s: %v", loadTenant, loadNS, err)
		}
		for _, e := range l.Entries {
			got[e.Key] = string(e.Value)
		}
		if page = l.NextPageToken; page == "" {
			break
		}
	}
	lost := 0
	for k, v := range acked {
		if got[k] != v {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged write %s=%s lost (read %q)", k, v, got[k])
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged writes lost", lost, len(acked))
	}
	t.Logf("all %d acknowledged writes read back (%d keys in the namespace)", len(acked), len(got))
}
