package fsm

import "fmt"

// Limits are the replicated bounds on what the state keeps for retries.
// The leader proposes its own (its flags) when they differ from the
// state's (KindLimitsSet), so every replica decides evictions from the same
// numbers, whatever flags it was started with. Zero fields take defaults.
type Limits struct {
	// SessionTTL: a client session unused this long (ms) expires.
	SessionTTL int64
	// SessionBytes bounds the bytes of all sessions (their records and
	// remembered answers); past it the least recently used are dropped.
	SessionBytes int64
	// SessionsPerTenant bounds the live sessions of one tenant (the
	// admin's count as one tenant); opening one more drops the tenant's
	// least recently used.
	SessionsPerTenant int64
	// IdemBytes and IdemTenantBytes bound the remembered answers to
	// explicit Idempotency-Keys, in all and per tenant; past either the
	// oldest are dropped.
	IdemBytes       int64
	IdemTenantBytes int64
	// MaxStateBytes bounds the data (usage.go); 0 is no bound.
	MaxStateBytes int64
	// SessionTenantBytes bounds the bytes of one tenant's sessions (the
	// admin's count as one tenant); past it the tenant's least recently
	// used are dropped, so that no tenant evicts another's through
	// SessionBytes alone. 0 is no such bound: what a state from before it
	// holds, so it has no default here (batond's flag has one). Only in
	// EntryVersion5 entries (entryVersion); a state that holds it is
	// snapshotFormat4 (sessionTenantMarkerKey).
	SessionTenantBytes int64 `codec:",omitempty"`
}

func (l *Limits) entryVersion() byte {
	if l.SessionTenantBytes != 0 {
		return EntryVersion5
	}
	return 0
}

// Defaults of Limits.
const (
	DefaultSessionTTL        int64 = 60 * 60 * 1000 // 1 hour
	DefaultSessionBytes      int64 = 64 << 20
	DefaultSessionsPerTenant int64 = 4096
	DefaultIdemBytes         int64 = 64 << 20
	DefaultIdemTenantBytes   int64 = 16 << 20
	// DefaultSessionTenantBytes is batond's --session-tenant-bytes: a
	// quarter of the default SessionBytes, as for Idempotency-Keys.
	DefaultSessionTenantBytes int64 = 16 << 20
)

// WithDefaults fills zero fields with the defaults.
func (l Limits) WithDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.SessionTTL, DefaultSessionTTL)
	def(&l.SessionBytes, DefaultSessionBytes)
	def(&l.SessionsPerTenant, DefaultSessionsPerTenant)
	def(&l.IdemBytes, DefaultIdemBytes)
	def(&l.IdemTenantBytes, DefaultIdemTenantBytes)
	return l
}

// KindLimitsSet replaces the replicated Limits (args: Limits).
const KindLimitsSet Kind = "limits.set"

const limitsKey = "cfg/limits"

// sessionTenantMarkerKey is present once the limits hold a per-tenant
// session budget: an older member would drop the field and keep no such
// bound, so a snapshot of the state is snapshotFormat4, which it refuses.
const sessionTenantMarkerKey = "cfg/sessiontenant"

func applyLimitsSet(f *FSM, _ *applyCtx, c *Command) *Result {
	if c.Principal != "" {
		return fail(CodeForbidden, "only the cluster sets limits", nil)
	}
	var l Limits
	if r := decodeArgs(c, &l); r != nil {
		return r
	}
	if l.SessionTTL < 0 || l.SessionBytes < 0 || l.SessionsPerTenant < 0 || l.IdemBytes < 0 || l.IdemTenantBytes < 0 || l.MaxStateBytes < 0 || l.SessionTenantBytes < 0 {
		return fail(CodeInvalidArgument, fmt.Sprintf("negative limit in %+v", l), nil)
	}
	l = l.WithDefaults()
	f.st.Put(limitsKey, encode(&l))
	f.limitsCache = nil
	if l.SessionTenantBytes > 0 && !f.st.Has(sessionTenantMarkerKey) {
		f.st.Put(sessionTenantMarkerKey, []byte{1})
	}
	f.evictAllTenantSessions(l.SessionTenantBytes)
	f.evictSessions(l.SessionBytes, "")
	return okValue(OutcomeOK, l)
}

// limits returns the replicated limits (defaults until a leader set them).
func (f *FSM) limits() Limits {
	if f.limitsCache != nil {
		return *f.limitsCache
	}
	var l Limits
	if raw, ok := f.st.Get(limitsKey); ok {
		_ = decode(raw, &l) // a record that does not decode counts as unset
	}
	l = l.WithDefaults()
	f.limitsCache = &l
	return l
}

// Limits returns the replicated limits in force.
func (f *FSM) Limits() Limits {
	f.mu.Lock() // limits fills a cache
	defer f.mu.Unlock()
	return f.limits()
}
