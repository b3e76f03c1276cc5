package fsm

import (
	"bytes"
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
// error if the key was used for another request, or nil if it is new.
func (f *FSM) idempotentReplay(ctx *applyCtx, c *Command) *Result {
	raw, ok := f.st.Get(c.idemStoreKey())
	if !ok {
		return nil
	}
	var rec idemRecord
	if decode(raw, &rec) != nil || rec.Expires <= ctx.now {
		return nil
	}
	if !bytes.Equal(rec.FP, c.IdemFP) {
		return fail(CodeIdempotencyMismatch, "Idempotency-Key was used with a different request", nil)
	}
	r := rec.Result
	r.Replay = true
	return &r
}

func (f *FSM) rememberIdempotent(ctx *applyCtx, c *Command, r *Result) {
	if r.Code == CodeIdempotencyMismatch {
		return
	}
	// A long poll's intermediate queue claim that found nothing is not its
	// answer: the next round with the same key evaluates the queue afresh.
	// Its final attempt (QueueClaimArgs.Final) is remembered like any
	// answer, so that a late duplicate of the request replays "nothing"
	// instead of claiming a task the client will never hear of.
	if c.Kind == KindTaskQueueClaim && r.Outcome == OutcomeNoContent && !queueClaimFinal(c) {
		return
	}
	key := c.idemStoreKey()
	if old, ok := f.st.Get(key); ok { // an expired record being replaced
		var rec idemRecord
		if decode(old, &rec) == nil {
			f.st.Delete(idemExpiryKey(rec.Expires, key))
		}
	}
	ttl := c.IdemTTL
	if ttl <= 0 {
		ttl = DefaultIdempotencyTTL
	}
	r.JSON() // the record keeps the encoded answer
	rec := idemRecord{FP: c.IdemFP, Expires: ctx.now + ttl, Result: *r}
	rec.Result.Index = ctx.index
	f.st.Put(key, encode(&rec))
	f.st.Put(idemExpiryKey(rec.Expires, key), nil)
}

// DefaultIdempotencyTTL is 24 hours in milliseconds.
const DefaultIdempotencyTTL int64 = 24 * 60 * 60 * 1000

// purgeIdempotency drops at most max records that expired by now. Bounding
// the work keeps every Apply short; the backlog drains over later commands.
func (f *FSM) purgeIdempotency(now int64, max int) {
	var expired []string
	f.st.Scan(idemExpiryPrefix, "", func(k string, _ []byte) bool {
		if len(expired) >= max || k[len(idemExpiryPrefix):len(idemExpiryPrefix)+16] > hex16(now) {
			return false
		}
		expired = append(expired, k)
		return true
	})
	for _, k := range expired {
		f.st.Delete(k)
		f.st.Delete(strings.SplitN(k, "/", 3)[2])
	}
}

// IdempotentAnswer returns the answer remembered for an Idempotency-Key of
// principal in tenant, as a replay, when there is one for a request with
// fingerprint fp: what applying the same request again would answer. A
// key used with another request answers idempotency_mismatch. It lets a
// handler that may answer without proposing (a queue claim that sees
// nothing claimable) replay an earlier attempt that was applied.
func (f *FSM) IdempotentAnswer(tenant, principal, key string, fp []byte, now int64) (*Result, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c := &Command{Tenant: tenant, Principal: principal, IdemKey: key, IdemFP: fp}
	r := f.idempotentReplay(&applyCtx{now: now, index: f.applied}, c)
	return r, r != nil // a replay carries the index of the first answer
}

func queueClaimFinal(c *Command) bool {
	var a QueueClaimArgs
	return decode(c.Args, &a) == nil && a.Final
}
