package fsm

import (
	"fmt"
	"strings"
)

// State quotas, as etcd's --quota-backend-bytes: past the node's limit
// (Limits.MaxStateBytes, replicated) or a tenant's (TenantQuota, set by
// the admin), a command that grows the data is refused with
// resource_exhausted and changes nothing; reads, deletes and commands that
// shrink the data keep working. The decision is made in Apply from the
// state alone, so every replica makes the same one.
//
// What counts is the data: every key and value except the retry state
// (Idempotency-Key records, client sessions and their indexes), which has
// byte budgets of its own and makes room by dropping its oldest. A
// tenant's data is what lies under t/<tenant>.

// usage is the data's size: in all, and per tenant.
type usage struct {
	bytes   int64
	tenants map[string]*tenantUse
}

type tenantUse struct{ bytes, keys int64 }

// retryPrefixes hold the retry state, which quotas do not count.
var retryPrefixes = []string{hashedPrefix, idemExpiryPrefix, "it/", "ih/", sessionPrefix, sessionAnswerPrefix, sessionExpiryPrefix}

func (u *usage) add(key string, bytes, keys int64) {
	if len(key) > 1 && key[1] == '/' && key[0] == 't' {
		t := key[2:]
		if i := strings.IndexByte(t, '/'); i >= 0 {
			t = t[:i]
		}
		if u.tenants == nil {
			u.tenants = map[string]*tenantUse{}
		}
		tu := u.tenants[t]
		if tu == nil {
			tu = &tenantUse{}
			u.tenants[t] = tu
		}
		tu.bytes += bytes
		tu.keys += keys
		if tu.keys == 0 {
			delete(u.tenants, t)
		}
	} else {
		for _, p := range retryPrefixes {
			if strings.HasPrefix(key, p) {
				return
			}
		}
	}
	u.bytes += bytes
}

// TenantQuota bounds one tenant's data, and the request rate of each of
// its principals (a token bucket per principal, applied by each node to
// the requests it serves); 0 is no bound.
type TenantQuota struct {
	MaxBytes   int64   `json:"max_bytes"`
	MaxKeys    int64   `json:"max_keys"`
	RatePerSec float64 `json:"rate_per_sec"`
	Burst      int64   `json:"burst"`
}

// TenantUsage is a tenant's quota and what its data takes.
type TenantUsage struct {
	Tenant string `json:"tenant"`
	TenantQuota
	UsedBytes int64 `json:"used_bytes"`
	UsedKeys  int64 `json:"used_keys"`
}

// KindTenantQuota sets a tenant's quota (args: TenantQuotaArgs).
const KindTenantQuota Kind = "tenant.quota"

// TenantQuotaArgs sets the quota of the command's tenant.
type TenantQuotaArgs struct {
	TenantQuota
}

func tenantQuotaKey(t string) string { return "tq/" + t }

func applyTenantQuota(f *FSM, _ *applyCtx, c *Command) *Result {
	var a TenantQuotaArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if c.Principal != "" {
		return fail(CodeForbidden, "only the admin sets quotas", nil)
	}
	if a.MaxBytes < 0 || a.MaxKeys < 0 || a.RatePerSec < 0 || a.Burst < 0 || a.RatePerSec != a.RatePerSec {
		return fail(CodeInvalidArgument, "max_bytes, max_keys, rate_per_sec and burst must not be negative (0: no limit)", nil)
	}
	if _, ok := f.st.Get(tenantKey(c.Tenant)); !ok {
		return fail(CodeNotFound, fmt.Sprintf("tenant %q not found", c.Tenant), nil)
	}
	if a.TenantQuota == (TenantQuota{}) {
		f.st.Delete(tenantQuotaKey(c.Tenant))
	} else {
		f.st.Put(tenantQuotaKey(c.Tenant), encode(&a.TenantQuota))
	}
	return okValue(OutcomeOK, f.tenantUsage(c.Tenant))
}

func (f *FSM) tenantQuota(t string) TenantQuota {
	var q TenantQuota
	if raw, ok := f.st.Get(tenantQuotaKey(t)); ok {
		_ = decode(raw, &q) // a record that does not decode counts as no quota
	}
	return q
}

func (f *FSM) tenantUsage(t string) TenantUsage {
	u := TenantUsage{Tenant: t, TenantQuota: f.tenantQuota(t)}
	if tu := f.st.use.tenants[t]; tu != nil {
		u.UsedBytes, u.UsedKeys = tu.bytes, tu.keys
	}
	return u
}

// TenantUsage returns a tenant's quota and usage.
func (f *FSM) TenantUsage(t string) TenantUsage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.tenantUsage(t)
}

// quotaMark is the data's size before a command.
type quotaMark struct {
	bytes            int64
	tenantB, tenantK int64
}

func (f *FSM) markQuota(tenant string) quotaMark {
	m := quotaMark{bytes: f.st.use.bytes}
	if tu := f.st.use.tenants[tenant]; tu != nil {
		m.tenantB, m.tenantK = tu.bytes, tu.keys
	}
	return m
}

// controlKinds are never refused for quota: the cluster needs them to run
// (membership, limits, purges carry no tenant anyway), and the admin needs
// them to get a tenant out of its quota (set a quota, manage tenants and
// principals).
var controlKinds = map[Kind]bool{KindTenantQuota: true, KindTenantPut: true, KindPrincipalCreate: true, KindPrincipalDelete: true}

// overQuota returns why the command just applied, which grew the data
// from m, must be refused, or "".
func (f *FSM) overQuota(c *Command, m quotaMark) string {
	if c.Tenant == "" || controlKinds[c.Kind] {
		return ""
	}
	if lim := f.limits().MaxStateBytes; lim > 0 && f.st.use.bytes > m.bytes && f.st.use.bytes > lim {
		return fmt.Sprintf("the state would hold %d bytes, over the cluster's limit of %d (--max-state-bytes); delete data to make room", f.st.use.bytes, lim)
	}
	q := f.tenantQuota(c.Tenant)
	tu := f.st.use.tenants[c.Tenant]
	if tu == nil || (q.MaxBytes == 0 && q.MaxKeys == 0) {
		return ""
	}
	if q.MaxBytes > 0 && tu.bytes > m.tenantB && tu.bytes > q.MaxBytes {
		return fmt.Sprintf("tenant %q would hold %d bytes, over its quota of %d; delete data to make room", c.Tenant, tu.bytes, q.MaxBytes)
	}
	if q.MaxKeys > 0 && tu.keys > m.tenantK && tu.keys > q.MaxKeys {
		return fmt.Sprintf("tenant %q would hold %d keys, over its quota of %d; delete data to make room", c.Tenant, tu.keys, q.MaxKeys)
	}
	return ""
}

// ChunkHoldRefusal says why a hold of a chunk of size bytes by tenant,
// which does not hold it yet, would be refused for quota now ("" if it
// would fit), so that an upload is refused before its body is stored and
// copied to the peers. It counts what applyChunkHeld writes, always with
// a new global record, so that the answer does not depend on whether
// another tenant holds the chunk; the hold itself is decided by Apply.
func (f *FSM) ChunkHoldRefusal(tenant, digest string, size int64) string {
	f.mu.Lock() // limits fills a cache
	defer f.mu.Unlock()
	hold := int64(len(chunkHoldKey(tenant, digest)) + len(encode(&chunkHold{Size: size, HeldAt: f.clock})))
	all := hold + int64(len(chunkGlobalKey(digest))+len(encode(&chunkGlobal{Size: size, Holders: 1}))+len(chunkGCKey(f.clock, tenant, digest)))
	if lim := f.limits().MaxStateBytes; lim > 0 && f.st.use.bytes+all > lim {
		return fmt.Sprintf("the state would hold %d bytes, over the cluster's limit of %d (--max-state-bytes); delete data to make room", f.st.use.bytes+all, lim)
	}
	u := f.tenantUsage(tenant)
	if u.MaxBytes > 0 && u.UsedBytes+hold > u.MaxBytes {
		return fmt.Sprintf("tenant %q would hold %d bytes, over its quota of %d; delete data to make room", tenant, u.UsedBytes+hold, u.MaxBytes)
	}
	if u.MaxKeys > 0 && u.UsedKeys+1 > u.MaxKeys {
		return fmt.Sprintf("tenant %q would hold %d keys, over its quota of %d; delete data to make room", tenant, u.UsedKeys+1, u.MaxKeys)
	}
	return ""
}

// StateBytes is the size of the data that quotas count.
func (f *FSM) StateBytes() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.use.bytes
}
