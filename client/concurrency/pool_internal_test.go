package concurrency

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// queued waits until p holds n releases for its next batch.
func queued(t *testing.T, p *pool, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; runtime.Gosched() {
		p.mu.Lock()
		got := len(p.pending)
		p.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d releases queued, want %d", got, n)
		}
	}
}

// TestFinishWithdrawsAQueuedRelease: a release whose caller gave up before
// its batch was sent is withdrawn, not sent later: finish has told the
// caller it failed (before, it stayed queued and was sent, so a Complete
// reported as failed applied, and the release Run sends after a failure,
// putting the task back to be claimed, then undid it).
func TestFinishWithdrawsAQueuedRelease(t *testing.T) {
	p := &pool{wakeClaim: make(chan struct{}, 1), wakeFlush: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.finish(ctx, &Lease{}, client.UpdateTaskRequest{})
		errc <- err
	}()
	queued(t, p, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("finish: %v, want context.Canceled", err)
	}
	if len(p.pending) != 0 {
		t.Fatal("the release is still queued after finish reported it not sent")
	}
	if p.finishing != 0 {
		t.Fatalf("%d leases counted as finishing after the only release was withdrawn, want 0", p.finishing)
	}
}

// TestRefusedWholeOnlyWhenNothingApplied: a batch's error sends its
// updates again one by one only when it surely wrote nothing. A retry
// refused as idempotency_expired, or an answer (a 429) after an attempt
// that may have applied, leaves the batch in doubt: sent again update by
// update, its updates could apply twice (before, both counted as refused).
func TestRefusedWholeOnlyWhenNothingApplied(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a 409 version_mismatch", &client.Error{Status: 409, Code: "version_mismatch"}, true},
		{"a 507 resource_exhausted", &client.Error{Status: 507, Code: "resource_exhausted"}, true},
		{"a 400 invalid_argument", &client.Error{Status: 400, Code: "invalid_argument"}, true},
		{"a 409 idempotency_expired", &client.Error{Status: 409, Code: "idempotency_expired"}, false},
		{"a 429 after an attempt in doubt", fmt.Errorf("%w: an earlier attempt got no answer: %w",
			client.ErrOutcomeUnknown, &client.Error{Status: 429, Code: "rate_limited"}), false},
		{"a 503", &client.Error{Status: 503, Code: "unavailable"}, false},
	} {
		if got := refusedWhole(tc.err); got != tc.want {
			t.Errorf("%s: refusedWhole %v, want %v", tc.name, got, tc.want)
		}
	}
}
