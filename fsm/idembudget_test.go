package fsm

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// uuid7 is a UUIDv7-shaped key carrying time ms.
func uuid7(ms int64, n int) string {
	h := fmt.Sprintf("%012x", ms)
	return fmt.Sprintf("%s-%s-7000-8000-%012x", h[:8], h[8:], n)
}

// TestIdempotencyBudget: the records of explicit keys stay within the
// replicated byte budgets, per tenant and in all, the oldest dropped
// first; a retry of a dropped key that carries its time (UUIDv7) is
// refused with idempotency_expired instead of applied again, and a replica
// restored from a snapshot counts the same bytes.
func TestIdempotencyBudget(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	applyOne(t, f, 2, tenantPut(1000, "beta"))
	const tenantBudget, nodeBudget = 40_000, 60_000
	applyOne(t, f, 3, NewCommand(KindLimitsSet, 1000, "", "", &Limits{IdemTenantBytes: tenantBudget, IdemBytes: nodeBudget}))
	index := uint64(4)
	put := func(tenant, key string, now int64, value string) *Result {
		c := idem(kvPut(now, tenant, "k", value), "", key, "fp-"+key, DefaultIdempotencyTTL)
		r := applyOne(t, f, index, c)
		index++
		return r
	}
	for i := range 400 {
		if r := put("acme", uuid7(int64(2000+i), i), int64(2000+i), `"some value of a few dozen bytes"`); !r.OK() || r.Replay {
			t.Fatalf("write %d: %s", i, describe(r))
		}
		if f.idemTenantBytes["acme"] > tenantBudget {
			t.Fatalf("after write %d: acme's records count %d bytes, over its budget %d", i, f.idemTenantBytes["acme"], tenantBudget)
		}
	}
	for i := range 400 {
		put("beta", uuid7(int64(3000+i), i), int64(3000+i), `"another value"`)
		if f.idemBytes > nodeBudget {
			t.Fatalf("after beta's write %d: records count %d bytes, over the node's budget %d", i, f.idemBytes, nodeBudget)
		}
	}
	// The newest of acme are kept (replayed), the oldest gone: a retry of
	// one is refused, not applied again.
	before := kvVersion(f, "acme", "k")
	if r := put("acme", uuid7(2000+399, 399), 5000, `"some value of a few dozen bytes"`); !r.Replay {
		t.Errorf("retry of acme's newest key: %s replay %v, want a replay", describe(r), r.Replay)
	}
	if r := put("acme", uuid7(2000, 0), 5000, `"some value of a few dozen bytes"`); r.Code != CodeIdempotencyExpired {
		t.Errorf("retry of acme's oldest key, dropped by the budget: %s, want %s", describe(r), CodeIdempotencyExpired)
	}
	if got := kvVersion(f, "acme", "k"); got != before {
		t.Errorf("a retry was applied: version %d, want %d", got, before)
	}
	// A key without a time cannot be told from a new one once dropped.
	if r := put("acme", "plain-key", 5000, `1`); !r.OK() || r.Replay {
		t.Errorf("a new plain key: %s", describe(r))
	}
	// A new UUIDv7 key, newer than anything dropped, applies.
	if r := put("acme", uuid7(9000, 1), 9000, `2`); !r.OK() || r.Replay {
		t.Errorf("a new UUIDv7 key: %s", describe(r))
	}
	g := New()
	restoreFrom(t, g, persist(t, f))
	if g.idemBytes != f.idemBytes || g.idemTenantBytes["acme"] != f.idemTenantBytes["acme"] {
		t.Errorf("restored replica counts %d (acme %d), this one %d (acme %d)", g.idemBytes, g.idemTenantBytes["acme"], f.idemBytes, f.idemTenantBytes["acme"])
	}
}

// TestIdempotencyRetryAfterWindow: the same request with the same key,
// after its window but before its record was purged, is refused; the key
// with another request after its window is a new request.
func TestIdempotencyRetryAfterWindow(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	// Many records expire at 2000, more than one command purges (64), so
	// some are still stored, expired, when the retries arrive.
	index := uint64(2)
	for i := range 200 {
		applyOne(t, f, index, idem(kvPut(1000, "acme", "k", `1`), "", fmt.Sprint("k", i), "A", 1000))
		index++
	}
	r := applyOne(t, f, index, idem(kvPut(2500, "acme", "k", `1`), "", "k199", "A", 1000))
	if r.Code != CodeIdempotencyExpired {
		t.Errorf("the same request after its window: %s, want %s", describe(r), CodeIdempotencyExpired)
	}
	r = applyOne(t, f, index+1, idem(kvPut(2500, "acme", "k", `2`), "", "k198", "B", 1000))
	if !r.OK() || r.Replay {
		t.Errorf("the key reused for a new request after its window: %s", describe(r))
	}
	if got := f.idemBytes; got <= 0 {
		t.Errorf("records count %d bytes", got)
	}
}

// TestKeyTime: the keys the Go client makes carry their time as the state
// machine reads it; other keys carry none.
func TestKeyTime(t *testing.T) {
	before := time.Now().UnixMilli()
	key := client.NewIdempotencyKey()
	kt, ok := keyTime(key)
	if !ok || kt < before || kt > time.Now().UnixMilli() {
		t.Errorf("keyTime(%q) = %d, %v; want a time from now", key, kt, ok)
	}
	for _, k := range []string{"", "k1", "0190a5e3-7b2c-4d4e-8f00-0123456789ab", "0190a5e3x7b2c-7d4e-8f00-0123456789ab", "0190a5e3-7b2c-7d4e-8f00-0123456789aZ"} {
		if _, ok := keyTime(k); ok {
			t.Errorf("keyTime(%q) found a time", k)
		}
	}
}

// TestIdempotencyHorizonIsolated: the keys one principal drops never make
// another's new keys look old, and a key dated in the future raises its
// own principal's horizon only to the leader's clock.
func TestIdempotencyHorizonIsolated(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	applyOne(t, f, 2, NewCommand(KindLimitsSet, 1000, "", "", &Limits{IdemTenantBytes: 3000, IdemBytes: 1 << 20}))
	index := uint64(3)
	put := func(principal, key string, now int64) *Result {
		c := idem(kvPut(now, "acme", "k", `1`), principal, key, "fp-"+key, DefaultIdempotencyTTL)
		r := applyOne(t, f, index, c)
		index++
		return r
	}
	// mallory fills the tenant's budget with keys dated far ahead.
	for i := range 40 {
		put("mallory", uuid7(9_999_999_000_000, i), int64(5000+i))
	}
	if h := f.idemHorizon("acme", "mallory"); h > 5040 {
		t.Errorf("mallory's horizon %d is past the leader's clock", h)
	}
	if h := f.idemHorizon("acme", "alice"); h != 0 {
		t.Errorf("alice's horizon %d moved with mallory's keys", h)
	}
	if r := put("alice", uuid7(5100, 1), 5100); !r.OK() || r.Replay {
		t.Errorf("alice's fresh key: %s, want it applied", describe(r))
	}
}
