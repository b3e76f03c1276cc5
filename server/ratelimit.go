package server

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/baton-dev/baton/fsm"
	"golang.org/x/time/rate"
)

// limiter applies, on this node, the per-principal bounds that an admin
// sets per tenant (fsm.TenantQuota: RatePerSec and Burst, a token bucket
// per principal) and the node's cap on concurrent watches per principal
// (--max-watches-per-principal). Each node counts what it serves: a
// request a follower forwards counts on the follower and on the leader.
type limiter struct {
	mu         sync.Mutex
	buckets    map[string]*bucket // tenant/principal
	watches    map[string]int
	maxWatches int
	lastSweep  time.Time
}

type bucket struct {
	lim      *rate.Limiter
	perSec   float64
	burst    int
	lastUsed time.Time
}

// bucketIdle is how long an unused principal's bucket is kept: the map
// holds only principals seen recently.
const bucketIdle = 10 * time.Minute

func newLimiter(maxWatches int) *limiter {
	return &limiter{buckets: map[string]*bucket{}, watches: map[string]int{}, maxWatches: maxWatches}
}

// allow takes a token of the principal's bucket, or returns rate_limited
// with the wait in Retry-After.
func (l *limiter) allow(id *identity, q fsm.TenantQuota, now time.Time) error {
	if id.admin || q.RatePerSec <= 0 {
		return nil
	}
	burst := int(q.Burst)
	if burst <= 0 {
		burst = max(1, int(math.Ceil(q.RatePerSec)))
	}
	key := id.tenant + "/" + id.principal
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	b := l.buckets[key]
	if b == nil || b.perSec != q.RatePerSec || b.burst != burst {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(q.RatePerSec), burst), perSec: q.RatePerSec, burst: burst}
		l.buckets[key] = b
	}
	b.lastUsed = now
	if b.lim.AllowN(now, 1) {
		return nil
	}
	wait := b.lim.ReserveN(now, 1)
	delay := wait.DelayFrom(now)
	wait.CancelAt(now)
	e := errorf(codeRateLimited, "principal %q is over its tenant's rate of %g requests/s (burst %d); retry in %v", id.principal, q.RatePerSec, burst, delay.Round(time.Millisecond))
	e.retryAfter = max(1, int(math.Ceil(delay.Seconds())))
	return e
}

// sweep forgets buckets idle for bucketIdle, at most once a minute.
func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if now.Sub(b.lastUsed) > bucketIdle {
			delete(l.buckets, k)
		}
	}
}

// startWatch counts a watch of the principal, or refuses it past the cap;
// the returned function ends it.
func (l *limiter) startWatch(id *identity) (func(), error) {
	if id.admin || l.maxWatches <= 0 {
		return func() {}, nil
	}
	key := id.tenant + "/" + id.principal
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watches[key] >= l.maxWatches {
		e := errorf(codeRateLimited, "principal %q has %d watches open on this node, its cap (--max-watches-per-principal)", id.principal, l.watches[key])
		e.retryAfter = 5
		return nil, e
	}
	l.watches[key]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.watches[key]--; l.watches[key] <= 0 {
			delete(l.watches, key)
		}
	}, nil
}

func setRetryAfter(w http.ResponseWriter, secs int) {
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}
