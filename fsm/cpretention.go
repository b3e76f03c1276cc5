package fsm

import (
	"fmt"
	"strings"
)

// Checkpoint retention: a tenant's policies bound its checkpoint storage
// by thread-id prefix (the longest prefix of a thread's id wins):
//
//   - KeepLast N: a put that leaves a namespace of the thread with more
//     than N checkpoints deletes the oldest, at most cpTrimPerPut of them
//     a put (the head is never one: N is at least 1).
//   - MaxAgeMs M: a checkpoint put under the policy expires M ms after
//     its put, by the leader's clock: the leader proposes checkpoint.purge
//     once the earliest expiry has passed, and Apply deletes what is due
//     by the command's time. A policy set later applies to checkpoints put
//     afterwards, as task retention does.
//
// Keys:
//
//	t/<tenant>/cppol/<prefix>                      CheckpointPolicy (prefix escaped)
//	cpexp/<expires hex16>/<tenant>/<thread>/<ns>/<id>   expiry index (escaped), value cpRunRef
const (
	KindCheckpointPolicy Kind = "checkpoint.policy"
	KindCheckpointPurge  Kind = "checkpoint.purge"
)

// Bounds of checkpoint retention (docs/api.md "Checkpoints").
const (
	MaxCheckpointPolicies = 100
	MaxCheckpointKeepLast = 100_000
	// cpTrimPerPut bounds what one put deletes under keep-last: a policy
	// set on a long thread trims it over the following puts.
	cpTrimPerPut = 64
	// maxCheckpointPurge bounds what one checkpoint.purge deletes.
	maxCheckpointPurge = 1000
)

// CheckpointPolicy bounds the checkpoints of threads whose id starts with
// Prefix; a zero field sets no bound of its kind.
type CheckpointPolicy struct {
	Prefix   string `json:"prefix"`
	KeepLast uint64 `json:"keep_last"`
	MaxAgeMs int64  `json:"max_age_ms"`
}

// CheckpointPolicyArgs sets a prefix's policy; both fields 0 clear it.
type CheckpointPolicyArgs struct {
	Prefix   string
	KeepLast uint64
	MaxAgeMs int64
}

// CheckpointPurgeArgs deletes up to Max checkpoints whose expiry is at or
// before the command's time.
type CheckpointPurgeArgs struct{ Max int }

const cpExpiryPrefix = "cpexp/"

func cpPolicyPrefix(tenant string) string { return "t/" + tenant + "/cppol/" }

func cpExpiryKey(tenant string, cp *Checkpoint) string {
	return cpExpiryPrefix + fmt.Sprintf("%016x", uint64(cp.ExpiresAt)) + "/" + tenant + "/" +
		escapeKeySegment(cp.Thread) + "/" + escapeKeySegment(cp.NS) + "/" + cp.ID
}

func applyCheckpointPolicy(f *FSM, _ *applyCtx, c *Command) *Result {
	var a CheckpointPolicyArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if !f.st.Has(tenantKey(c.Tenant)) {
		return fail(CodeNotFound, fmt.Sprintf("tenant %q not found", c.Tenant), nil)
	}
	key := cpPolicyPrefix(c.Tenant) + escapeKeySegment(a.Prefix)
	p := &CheckpointPolicy{Prefix: a.Prefix, KeepLast: a.KeepLast, MaxAgeMs: a.MaxAgeMs}
	if a.KeepLast == 0 && a.MaxAgeMs == 0 {
		f.st.Delete(key)
		return okValue(OutcomeOK, p)
	}
	if !f.st.Has(key) && len(checkpointPolicies(f.st, c.Tenant)) >= MaxCheckpointPolicies {
		return fail(CodeResourceExhausted, fmt.Sprintf("tenant %q has %d checkpoint policies, the most it may have", c.Tenant, MaxCheckpointPolicies), nil)
	}
	f.st.Put(key, encode(p))
	f.markCheckpoints5()
	return okValue(OutcomeOK, p)
}

func checkpointPolicies(st *Store, tenant string) []*CheckpointPolicy {
	out := []*CheckpointPolicy{}
	st.Scan(cpPolicyPrefix(tenant), "", func(_ string, v []byte) bool {
		var p CheckpointPolicy
		if decode(v, &p) == nil {
			out = append(out, &p)
		}
		return true
	})
	return out
}

// cpPolicyFor is the policy of the longest prefix of thread, nil if none.
func cpPolicyFor(st *Store, tenant, thread string) *CheckpointPolicy {
	var best *CheckpointPolicy
	for _, p := range checkpointPolicies(st, tenant) {
		if strings.HasPrefix(thread, p.Prefix) && (best == nil || len(p.Prefix) > len(best.Prefix)) {
			best = p
		}
	}
	return best
}

// CheckpointPolicies lists a tenant's checkpoint policies in prefix order.
func (f *FSM) CheckpointPolicies(tenant string) ([]*CheckpointPolicy, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return checkpointPolicies(f.st, tenant), f.applied
}

// retainCheckpoint applies the thread's policy to a checkpoint being put:
// its expiry, set on cp before it is stored.
func (f *FSM) retainCheckpoint(ctx *applyCtx, cp *Checkpoint) *CheckpointPolicy {
	p := cpPolicyFor(f.st, cp.Tenant, cp.Thread)
	if p != nil && p.MaxAgeMs > 0 {
		cp.ExpiresAt = ctx.now + p.MaxAgeMs
	}
	return p
}

// indexExpiry records a checkpoint with an expiry in the expiry index.
func (f *FSM) indexExpiry(cp *Checkpoint) {
	if cp.ExpiresAt != 0 {
		f.st.Put(cpExpiryKey(cp.Tenant, cp), encode(cpRunRef{Thread: cp.Thread, NS: cp.NS, ID: cp.ID}))
		f.markCheckpoints5()
	}
}

// trimNamespace deletes the oldest checkpoints of a namespace past the
// policy's KeepLast, at most cpTrimPerPut.
func (f *FSM) trimNamespace(ctx *applyCtx, p *CheckpointPolicy, tenant, thread, ns string) {
	if p == nil || p.KeepLast == 0 {
		return
	}
	prefix := nsPrefix(tenant, thread, ns) + "o/"
	var seen uint64
	var doomed []string
	f.st.Scan(prefix, "", func(k string, _ []byte) bool {
		if seen++; seen > p.KeepLast {
			doomed = append(doomed, k[strings.LastIndexByte(k, '/')+1:])
		}
		return len(doomed) < cpTrimPerPut
	})
	// The newest are first: delete the oldest of those found first, so a
	// cut-short trim leaves the newest.
	for i := len(doomed) - 1; i >= 0; i-- {
		f.deleteCheckpoint(ctx, tenant, thread, ns, doomed[i])
	}
}

func applyCheckpointPurge(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a CheckpointPurgeArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	type due struct {
		tenant string
		ref    cpRunRef
	}
	limit := min(a.Max, maxCheckpointPurge) // whatever the command says
	var doomed []due
	f.st.Scan(cpExpiryPrefix, "", func(k string, v []byte) bool {
		rest := k[len(cpExpiryPrefix):]
		if len(rest) < 17 || parseHex16(rest[:16]) > c.Now || len(doomed) >= limit {
			return false
		}
		tenant, _, _ := strings.Cut(rest[17:], "/")
		var r cpRunRef
		if decode(v, &r) == nil {
			doomed = append(doomed, due{tenant: tenant, ref: r})
		}
		return true
	})
	for _, d := range doomed {
		f.deleteCheckpoint(ctx, d.tenant, d.ref.Thread, d.ref.NS, d.ref.ID)
	}
	return okValue(OutcomeOK, map[string]any{"deleted": len(doomed)})
}

// NextCheckpointExpiry is the earliest checkpoint expiry, 0 if none.
func (f *FSM) NextCheckpointExpiry() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var next int64
	f.st.Scan(cpExpiryPrefix, "", func(k string, _ []byte) bool {
		if rest := k[len(cpExpiryPrefix):]; len(rest) >= 16 {
			next = parseHex16(rest[:16])
		}
		return false
	})
	return next
}
