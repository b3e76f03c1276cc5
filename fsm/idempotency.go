package fsm

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// idemRecord is a remembered answer to an Idempotency-Key.
type idemRecord struct {
	FP      []byte
	Expires int64
	Result  Result
}

func (c *Command) idemStoreKey() string { return idemKey(c.Tenant, c.Principal, c.IdemKey) }

// idempotentReplay returns the remembered answer for c's key, a mismatch
// error if the key was used for another request, idempotency_expired if
// the request is a retry older than the window, or nil if the key is new;
// with nil, the expired record still stored under the key, if any.
func (f *FSM) idempotentReplay(ctx *applyCtx, c *Command) (*Result, *idemRecord) {
	raw, ok := f.st.Get(c.idemStoreKey())
	if !ok {
		if kt, ok := keyTime(c.IdemKey); ok && kt <= f.idemHorizon(c.Tenant, c.Principal) {
			return expiredKey(c.IdemKey, "its time is at or before the newest of the caller's records that are no longer kept"), nil
		}
		return nil, nil
	}
	var rec idemRecord
	if decode(raw, &rec) != nil {
		return nil, nil
	}
	if rec.Expires <= ctx.now {
		if bytes.Equal(rec.FP, c.IdemFP) {
			// The same request, after its window: a retry that would
			// apply twice.
			return expiredKey(c.IdemKey, "the same request was answered before, longer ago than the idempotency window"), nil
		}
		return nil, &rec // the key, reused for a new request after its window
	}
	if !bytes.Equal(rec.FP, c.IdemFP) {
		return fail(CodeIdempotencyMismatch, "Idempotency-Key was used with a different request", nil), nil
	}
	r := rec.Result
	r.Replay = true
	return &r, nil
}

func expiredKey(key, why string) *Result {
	return fail(CodeIdempotencyExpired, fmt.Sprintf("Idempotency-Key %q is older than the idempotency window (%s): nothing was applied; use a new key if this is a new request", key, why),
		map[string]any{"reason": "key"})
}

// rememberIdempotent stores r as the answer to c's key, then keeps the
// byte budgets (Limits.IdemBytes, Limits.IdemTenantBytes), oldest first.
// prior is the expired record the key held (from idempotentReplay), which
// goes.
func (f *FSM) rememberIdempotent(ctx *applyCtx, c *Command, r *Result, prior *idemRecord) {
	if !remembered(c, r) {
		return
	}
	key := c.idemStoreKey()
	if prior != nil {
		f.dropIdem(key, prior.Expires, ctx.now)
	}
	ttl := c.IdemTTL
	if ttl <= 0 {
		ttl = DefaultIdempotencyTTL
	}
	r.JSON() // the record keeps the encoded answer
	rec := idemRecord{FP: c.IdemFP, Expires: ctx.now + ttl, Result: *r}
	rec.Result.Index = ctx.index
	val := encode(&rec)
	f.st.Put(key, val)
	f.st.Put(idemExpiryKey(rec.Expires, key), nil)
	f.st.Put(idemTenantExpiryKey(c.Tenant, rec.Expires, key), nil)
	f.countIdem(c.Tenant, idemCost(key, val))
	if rec.Expires < f.idemNextExpiry {
		f.idemNextExpiry = rec.Expires
	}
	lim := f.limits()
	for f.idemTenantBytes[c.Tenant] > lim.IdemTenantBytes && f.dropOldestIdem(idemTenantExpiryPrefix(c.Tenant), key, ctx.now) {
	}
	for f.idemBytes > lim.IdemBytes && f.dropOldestIdem(idemExpiryPrefix, key, ctx.now) {
	}
}

// idemOverhead is what a record counts for besides its key and value: its
// two index entries and the maps' bookkeeping.
const idemOverhead = 160

func idemCost(key string, val []byte) int64 { return int64(2*len(key) + len(val) + idemOverhead) }

func (f *FSM) countIdem(tenant string, delta int64) {
	if f.idemTenantBytes == nil {
		f.idemTenantBytes = map[string]int64{}
	}
	f.idemBytes += delta
	if n := f.idemTenantBytes[tenant] + delta; n != 0 {
		f.idemTenantBytes[tenant] = n
	} else {
		delete(f.idemTenantBytes, tenant)
	}
}

// dropOldestIdem drops the record first in the expiry index under prefix
// (ie/, or it/<tenant>/), never keep. It reports whether it dropped one.
func (f *FSM) dropOldestIdem(prefix, keep string, now int64) bool {
	var ikey string
	var exp int64
	f.st.Scan(prefix, "", func(k string, _ []byte) bool {
		rest := k[len(prefix):]
		if len(rest) < 17 || rest[17:] == keep {
			return true
		}
		exp, ikey = parseHex16(rest[:16]), rest[17:]
		return false
	})
	if ikey == "" {
		return false
	}
	f.dropIdem(ikey, exp, now)
	return true
}

// dropIdem forgets the record ikey with expiry exp: the record, its index
// entries and its bytes. A key that carries its time (UUIDv7) raises its
// principal's horizon, so that a retry of it is refused rather than
// applied; never past now (the leader's clock), so a key dated in the
// future cannot refuse the principal's keys made after it.
func (f *FSM) dropIdem(ikey string, exp, now int64) {
	tenant, principal, key := splitIdemKey(ikey)
	if val, ok := f.st.Get(ikey); ok {
		f.countIdem(tenant, -idemCost(ikey, val))
		f.st.Delete(ikey)
	}
	f.st.Delete(idemExpiryKey(exp, ikey))
	f.st.Delete(idemTenantExpiryKey(tenant, exp, ikey))
	if kt, ok := keyTime(key); ok {
		if kt = min(kt, now); kt > f.idemHorizon(tenant, principal) {
			f.st.Put(idemHorizonKey(tenant, principal), []byte(hex16(kt)))
		}
	}
}

// dropIdemOf forgets every Idempotency-Key record of a principal, with its
// index entries, bytes and horizon (a principal deleted). Its work is the
// principal's records, which the byte budgets bound.
func (f *FSM) dropIdemOf(tenant, principal string) {
	type rec struct {
		ikey string
		exp  int64
	}
	var recs []rec
	f.st.Scan(idemKey(tenant, principal, ""), "", func(k string, v []byte) bool {
		var r idemRecord
		if decode(v, &r) == nil {
			recs = append(recs, rec{k, r.Expires})
		}
		return true
	})
	for _, r := range recs {
		f.dropIdem(r.ikey, r.exp, 0) // now 0: no horizon is raised
	}
	f.st.Delete(idemHorizonKey(tenant, principal))
}

// idemHorizon is the newest time carried by a key of principal in tenant
// whose record is no longer kept (0: none).
func (f *FSM) idemHorizon(tenant, principal string) int64 {
	v, ok := f.st.Get(idemHorizonKey(tenant, principal))
	if !ok {
		return 0
	}
	return parseHex16(string(v))
}

// splitIdemKey returns the tenant, principal and caller's key of an i/ key.
func splitIdemKey(ikey string) (tenant, principal, key string) {
	parts := strings.SplitN(ikey, "/", 4)
	if len(parts) < 4 {
		return "", "", ""
	}
	return parts[1], parts[2], parts[3]
}

// keyTime returns the Unix ms time in a UUIDv7 key (RFC 9562), as in
// 0190a5e3-7b2c-7d4e-8f00-0123456789ab: the first 48 bits.
func keyTime(key string) (int64, bool) {
	if len(key) != 36 || key[8] != '-' || key[13] != '-' || key[18] != '-' || key[23] != '-' || key[14] != '7' {
		return 0, false
	}
	for i := 0; i < 36; i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue
		}
		if !isHex(key[i]) {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(key[:8]+key[9:13], 16, 64)
	if err != nil {
		return 0, false
	}
	return int64(v), true
}

func isHex(b byte) bool { return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F' }

// recountIdem derives the idempotency byte counts from the state (after a
// restore): the same sums every replica keeps up to date as it applies.
func (f *FSM) recountIdem() {
	f.idemBytes, f.idemTenantBytes = 0, nil
	f.st.Scan(hashedPrefix, "", func(k string, v []byte) bool {
		tenant, _, _ := splitIdemKey(k)
		f.countIdem(tenant, idemCost(k, v))
		return true
	})
}

// DefaultIdempotencyTTL is 24 hours in milliseconds.
const DefaultIdempotencyTTL int64 = 24 * 60 * 60 * 1000

// purgeIdempotency drops at most max records that expired by now. Bounding
// the work keeps every Apply short; the backlog drains over later commands.
// Every command calls it; while no record is due (now is before
// f.idemNextExpiry) it does not look.
func (f *FSM) purgeIdempotency(now int64, max int) {
	if now < f.idemNextExpiry {
		return
	}
	type due struct {
		exp  int64
		ikey string
	}
	var expired []due
	next := int64(math.MaxInt64) // no record left
	dueBy := hex16(now)
	f.st.Scan(idemExpiryPrefix, "", func(k string, _ []byte) bool {
		if len(expired) >= max {
			next = 0 // more may be due: look again next time
			return false
		}
		exp := k[len(idemExpiryPrefix) : len(idemExpiryPrefix)+16]
		if exp > dueBy {
			next = parseHex16(exp)
			return false
		}
		expired = append(expired, due{parseHex16(exp), k[len(idemExpiryPrefix)+17:]})
		return true
	})
	f.idemNextExpiry = next
	for _, d := range expired {
		f.dropIdem(d.ikey, d.exp, now)
	}
}

// ReplayAnswer returns the answer remembered for a retry of c (by its
// Idempotency-Key or its place in a client session), as a replay, when
// there is one: what applying c again would answer. A key or session
// number used with another request answers idempotency_mismatch; a
// session write that could not be applied again answers
// idempotency_expired. It lets a handler that may answer without
// proposing (a queue claim that sees nothing claimable) replay an earlier
// attempt that was applied. c is not applied.
func (f *FSM) ReplayAnswer(c *Command, now int64) (*Result, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ctx := &applyCtx{now: max(now, f.clock), index: f.applied}
	var r *Result
	switch {
	case c.Session != 0:
		r, _ = f.sessionCheck(ctx, c)
	case c.IdemKey != "":
		r, _ = f.idempotentReplay(ctx, c)
	}
	return r, r != nil // a replay carries the index of the first answer
}

func queueClaimFinal(c *Command) bool {
	var a QueueClaimArgs
	return decode(c.Args, &a) == nil && a.Final
}

// parseHex16 reads an expiry written by hex16; 0 (look every time) if it
// is not one.
func parseHex16(s string) int64 {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || v > math.MaxInt64 {
		return 0
	}
	return int64(v)
}
