// Package backoff is the pause between rounds of failed attempts, shared
// by the Go SDK (client) and its coordination primitives
// (client/concurrency): 50ms doubling up to 250ms, with jitter.
//
// The cap is short because the usual cause is a leader election, which
// ends in well under a second: a longer pause would add to the
// unavailability the caller sees.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Start is the first pause, Cap the longest.
const (
	Start = 50 * time.Millisecond
	Cap   = 250 * time.Millisecond
)

// Backoff doubles from Start up to Cap. Its zero value starts at Start.
type Backoff struct{ next time.Duration }

// Delay returns the pause before the next round: the backoff, or the
// server's Retry-After when that is shorter (0: none), and at most
// remaining. Retry-After counts whole seconds, far coarser than a Raft
// election (a new leader usually serves within a second), so it caps the
// schedule instead of stretching it.
func (b *Backoff) Delay(retryAfter, remaining time.Duration) time.Duration {
	if b.next <= 0 {
		b.next = Start
	}
	d := b.next - rand.N(b.next/4) // jitter, so callers that failed together spread out
	b.next = min(2*b.next, Cap)
	if retryAfter > 0 && retryAfter < d {
		d = retryAfter
	}
	return min(d, remaining)
}

// Reset starts the schedule over at Start.
func (b *Backoff) Reset() { b.next = Start }

// Sleep waits d, or until ctx ends (then it returns ctx.Err()). A d of
// zero or less returns ctx.Err() at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
