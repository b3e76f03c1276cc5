package fsm

import (
	"fmt"
	"testing"
)

// TestTenantQuota: a tenant at its quota gets resource_exhausted for
// writes that grow its data and nothing changes; other tenants keep
// writing; deletes and writes that do not grow still work, and deleting
// data makes room again. Replicas restored from a snapshot count the same.
func TestTenantQuota(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	applyOne(t, f, 2, tenantPut(1000, "beta"))
	if r := applyOne(t, f, 3, NewCommand(KindTenantQuota, 1000, "acme", "", &TenantQuotaArgs{TenantQuota{MaxKeys: 6}})); !r.OK() {
		t.Fatalf("quota: %s", describe(r))
	}
	index := uint64(4)
	put := func(tenant, key string) *Result {
		r := applyOne(t, f, index, kvPut(1000, tenant, key, `"v"`))
		index++
		return r
	}
	del := func(tenant, key string) *Result {
		r := applyOne(t, f, index, NewCommand(KindKVDelete, 1000, tenant, "", &KVDeleteArgs{Namespace: "ns", Key: key}))
		index++
		return r
	}
	var refused *Result
	n := 0
	for ; n < 20; n++ {
		if r := put("acme", fmt.Sprint("k", n)); !r.OK() {
			refused = r
			break
		}
	}
	if refused == nil || refused.Code != CodeResourceExhausted {
		t.Fatalf("20 puts under a quota of 6 keys: the last answered %v", refused)
	}
	u := f.TenantUsage("acme")
	if u.UsedKeys > 6 {
		t.Errorf("acme holds %d keys over its quota of 6", u.UsedKeys)
	}
	if _, _, ok := f.GetKV("acme", "ns", fmt.Sprint("k", n), 0); ok {
		t.Errorf("the refused put was applied")
	}
	if r := put("beta", "x"); !r.OK() {
		t.Errorf("another tenant's write: %s", describe(r))
	}
	if r := put("acme", "k0"); !r.OK() { // overwrite of the same size: does not grow
		t.Errorf("an overwrite that does not grow: %s", describe(r))
	}
	if r := del("acme", "k0"); !r.OK() {
		t.Fatalf("delete over quota: %s", describe(r))
	}
	if r := put("acme", "again"); !r.OK() {
		t.Errorf("a put after a delete made room: %s", describe(r))
	}
	g := New()
	restoreFrom(t, g, persist(t, f))
	if gu := g.TenantUsage("acme"); gu != f.TenantUsage("acme") || g.StateBytes() != f.StateBytes() {
		t.Errorf("restored replica counts %+v (%d bytes), this one %+v (%d)", gu, g.StateBytes(), f.TenantUsage("acme"), f.StateBytes())
	}
	// The cluster's limit: every tenant past it is refused; the cluster's
	// own commands are not.
	applyOne(t, f, index, NewCommand(KindLimitsSet, 1000, "", "", &Limits{MaxStateBytes: f.StateBytes()}))
	index++
	if r := put("beta", "y"); r.Code != CodeResourceExhausted {
		t.Errorf("a put past --max-state-bytes: %s, want %s", describe(r), CodeResourceExhausted)
	}
	if r := applyOne(t, f, index, NewCommand(KindMemberSet, 1000, "", "", &Member{ID: "n9", HTTPAddr: "h"})); !r.OK() {
		t.Errorf("a member record past the limit: %s", describe(r))
	}
	index++
	if r := applyOne(t, f, index, NewCommand(KindTenantQuota, 1000, "beta", "", &TenantQuotaArgs{TenantQuota{MaxKeys: 100}})); !r.OK() {
		t.Errorf("the admin setting a quota past the limit: %s", describe(r))
	}
}

// TestChunkHoldRefusalAgreesWithApply: the check an upload makes before
// storing a body never lets through a hold that Apply then refuses for
// quota (tenant bytes or keys, the cluster's bytes), whether or not
// another tenant holds the chunk; with ample room both allow it.
func TestChunkHoldRefusalAgreesWithApply(t *testing.T) {
	const digest = "sha256:ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"
	type limit struct {
		name   string
		slacks []int64 // room left before the hold, in bytes or keys
		ample  int64
	}
	var byteSlacks []int64
	for s := int64(-2); s <= 1000; s += 3 {
		byteSlacks = append(byteSlacks, s)
	}
	// The cluster's room is counted before limits.set, whose record takes
	// some of it.
	for _, l := range []limit{{"tenant bytes", byteSlacks, 400}, {"cluster bytes", byteSlacks, 1000}, {"tenant keys", []int64{0, 1}, 1}} {
		for _, slack := range l.slacks {
			for _, otherHolds := range []bool{false, true} {
				w := newWorld(t)
				w.ok(KindTenantPut, "other", &TenantPutArgs{Name: "other"})
				if otherHolds {
					w.ok(KindChunkHeld, "other", &ChunkHeldArgs{Digest: digest, Size: 4 << 20})
				}
				u := w.f.TenantUsage("acme")
				switch l.name {
				case "tenant bytes":
					w.ok(KindTenantQuota, "acme", &TenantQuotaArgs{TenantQuota{MaxBytes: u.UsedBytes + slack}})
				case "tenant keys":
					w.ok(KindTenantQuota, "acme", &TenantQuotaArgs{TenantQuota{MaxKeys: u.UsedKeys + slack}})
				case "cluster bytes":
					w.ok(KindLimitsSet, "", &Limits{MaxStateBytes: w.f.StateBytes() + slack})
				}
				why := w.f.ChunkHoldRefusal("acme", digest, 4<<20)
				r := w.do(KindChunkHeld, "acme", &ChunkHeldArgs{Digest: digest, Size: 4 << 20})
				if why == "" && !r.OK() {
					t.Errorf("%s, room %d, other holds %v: the check let through a hold Apply refused: %s", l.name, slack, otherHolds, describe(r))
				}
				if slack == l.ample && (why != "" || !r.OK()) {
					t.Errorf("%s, room %d, other holds %v: got check %q and %s, want both to allow it", l.name, slack, otherHolds, why, describe(r))
				}
			}
		}
	}
}
