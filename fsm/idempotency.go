package fsm

import (
	"bytes"
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
// error if the key was used for another request, or nil if it is new; with
// nil, the expired record still stored under the key, if any.
func (f *FSM) idempotentReplay(ctx *applyCtx, c *Command) (*Result, *idemRecord) {
	raw, ok := f.st.Get(c.idemStoreKey())
	if !ok {
		return nil, nil
	}
	var rec idemRecord
	if decode(raw, &rec) != nil {
		return nil, nil
	}
	if rec.Expires <= ctx.now {
		return nil, &rec
	}
	if !bytes.Equal(rec.FP, c.IdemFP) {
		return fail(CodeIdempotencyMismatch, "Idempotency-Key was used with a different request", nil), nil
	}
	r := rec.Result
	r.Replay = true
	return &r, nil
}

// rememberIdempotent stores r as the answer to c's key. prior is the
// expired record the key held (from idempotentReplay), whose expiry entry
// goes with it.
func (f *FSM) rememberIdempotent(ctx *applyCtx, c *Command, r *Result, prior *idemRecord) {
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
	if prior != nil {
		f.st.Delete(idemExpiryKey(prior.Expires, key))
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
	if rec.Expires < f.idemNextExpiry {
		f.idemNextExpiry = rec.Expires
	}
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
	var expired []string
	next := int64(math.MaxInt64) // no record left
	due := hex16(now)
	f.st.Scan(idemExpiryPrefix, "", func(k string, _ []byte) bool {
		if len(expired) >= max {
			next = 0 // more may be due: look again next time
			return false
		}
		if exp := k[len(idemExpiryPrefix) : len(idemExpiryPrefix)+16]; exp > due {
			next = parseHex16(exp)
			return false
		}
		expired = append(expired, k)
		return true
	})
	f.idemNextExpiry = next
	for _, k := range expired {
		f.st.Delete(k)
		f.st.Delete(strings.SplitN(k, "/", 3)[2])
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
