package fsm

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// sessionWrite places c in session id as write seq with ack and
// fingerprint fp.
func inSession(c *Command, id, seq, ack uint64, fp string) *Command {
	c.Session, c.Seq, c.Ack, c.IdemFP = id, seq, ack, []byte(fp)
	return c
}

func openSession(t *testing.T, f *FSM, index uint64, now int64, tenant, principal string) uint64 {
	t.Helper()
	r := applyOne(t, f, index, NewCommand(KindSessionOpen, now, tenant, principal, &SessionOpenArgs{}))
	if !r.OK() {
		t.Fatalf("session open: %s", describe(r))
	}
	id, err := strconv.ParseUint(r.Obj.(SessionView).SessionID, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func kvPut(now int64, tenant, key, value string) *Command {
	return NewCommand(KindKVPut, now, tenant, "", &KVPutArgs{Namespace: "ns", Key: key, Value: []byte(value)})
}

func kvVersion(f *FSM, tenant, key string) uint64 {
	e, _, ok := f.GetKV(tenant, "ns", key, 0)
	if !ok {
		return 0
	}
	return e.Version
}

// TestSessionExactlyOnce: a write retried in its session is answered from
// the session and applied once; acknowledged, unknown and expired writes
// are refused, never applied again.
func TestSessionExactlyOnce(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	sid := openSession(t, f, 2, 1000, "acme", "")

	first := applyOne(t, f, 3, inSession(kvPut(1000, "acme", "a", `1`), sid, 1, 1, "A"))
	if !first.OK() || first.Replay {
		t.Fatalf("first write: %s replay %v", describe(first), first.Replay)
	}
	v := kvVersion(f, "acme", "a")
	retry := applyOne(t, f, 4, inSession(kvPut(1100, "acme", "a", `1`), sid, 1, 1, "A"))
	if !retry.Replay || string(retry.JSON()) != string(first.JSON()) || retry.Index != first.Index {
		t.Errorf("retry: %s replay %v index %d; want the first answer replayed (index %d)", describe(retry), retry.Replay, retry.Index, first.Index)
	}
	if got := kvVersion(f, "acme", "a"); got != v {
		t.Errorf("retry applied again: version %d, want %d", got, v)
	}
	if r := applyOne(t, f, 5, inSession(kvPut(1100, "acme", "a", `2`), sid, 1, 1, "B")); r.Code != CodeIdempotencyMismatch {
		t.Errorf("same number, other request: %s, want %s", describe(r), CodeIdempotencyMismatch)
	}
	// Write 2 acknowledges write 1 (ack 2: every number below 2 is done).
	if r := applyOne(t, f, 6, inSession(kvPut(1200, "acme", "b", `1`), sid, 2, 2, "C")); !r.OK() || r.Replay {
		t.Fatalf("write 2: %s", describe(r))
	}
	if r := applyOne(t, f, 7, inSession(kvPut(1300, "acme", "a", `1`), sid, 1, 1, "A")); r.Code != CodeIdempotencyExpired {
		t.Errorf("acknowledged write retried: %s, want %s", describe(r), CodeIdempotencyExpired)
	}
	if got := kvVersion(f, "acme", "a"); got != v {
		t.Errorf("acknowledged write applied again: version %d, want %d", got, v)
	}
	// Out of order within the window: 4 before 3, both applied once.
	for i, seq := range []uint64{4, 3, 4, 3} {
		r := applyOne(t, f, uint64(8+i), inSession(kvPut(1300, "acme", fmt.Sprint("k", seq), `1`), sid, seq, 2, fmt.Sprint("S", seq)))
		if !r.OK() || r.Replay != (i >= 2) {
			t.Errorf("write %d (step %d): %s replay %v", seq, i, describe(r), r.Replay)
		}
	}
	// Another principal cannot use the session, nor can a made-up one be used.
	if r := applyOne(t, f, 20, inSession(kvPut(1300, "acme", "x", `1`), sid, 9, 1, "X")); !r.OK() {
		t.Fatalf("write 9: %s", describe(r))
	}
	other := inSession(kvPut(1300, "acme", "y", `1`), sid, 10, 1, "Y")
	other.Principal = "mallory"
	if r := applyOne(t, f, 21, other); r.Code != CodeIdempotencyExpired {
		t.Errorf("another principal's write in the session: %s, want %s", describe(r), CodeIdempotencyExpired)
	}
	if r := applyOne(t, f, 22, inSession(kvPut(1300, "acme", "y", `1`), sid+1, 1, 1, "Y")); r.Code != CodeIdempotencyExpired {
		t.Errorf("unknown session: %s, want %s", describe(r), CodeIdempotencyExpired)
	}
	if r := applyOne(t, f, 23, inSession(kvPut(1300, "acme", "y", `1`), sid, 11, 12, "Y")); r.Code != CodeInvalidArgument {
		t.Errorf("ack above the write's number: %s, want %s", describe(r), CodeInvalidArgument)
	}
	if _, _, ok := f.GetKV("acme", "ns", "y", 0); ok {
		t.Errorf("a refused write was applied")
	}
	// Unused for its TTL (leader time), the session expires: a retry of a
	// write it remembered is refused, not applied again.
	late := 1300 + DefaultSessionTTL
	if r := applyOne(t, f, 24, inSession(kvPut(late, "acme", "k4", `1`), sid, 4, 2, "S4")); r.Code != CodeIdempotencyExpired {
		t.Errorf("retry after the session expired: %s, want %s", describe(r), CodeIdempotencyExpired)
	}
	// The next command purges it, answers and all.
	applyOne(t, f, 25, tenantPut(late+1, "acme"))
	f.st.Scan("s", "", func(k string, _ []byte) bool {
		t.Errorf("left after expiry: %q", k)
		return true
	})
	if f.sessBytes != 0 {
		t.Errorf("session bytes after expiry: %d, want 0", f.sessBytes)
	}
}

// TestSessionStateBounded: however many writes a session makes, the state
// keeps the answers of those not yet acknowledged, at most
// MaxSessionAnswers of them; all sessions together stay within
// Limits.SessionBytes and a tenant within SessionsPerTenant, least
// recently used dropped first.
func TestSessionStateBounded(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	sid := openSession(t, f, 2, 1000, "acme", "")
	index := uint64(3)
	keysAt := 0
	for seq := uint64(1); seq <= 5000; seq++ {
		ack := seq - min(seq-1, 3) // three writes in flight
		applyOne(t, f, index, inSession(kvPut(1000, "acme", "k", `1`), sid, seq, ack, "same"))
		index++
		if seq == 100 {
			keysAt = f.Status().Keys
		}
	}
	if got := f.Status().Keys; got != keysAt {
		t.Errorf("keys after 5000 acknowledged writes: %d, after 100: %d; want no growth", got, keysAt)
	}
	// A client that never acknowledges: answers capped, the oldest go.
	sid2 := openSession(t, f, index, 1000, "acme", "")
	index++
	for seq := uint64(1); seq <= MaxSessionAnswers+50; seq++ {
		applyOne(t, f, index, inSession(kvPut(1000, "acme", "k", `1`), sid2, seq, 0, "same"))
		index++
	}
	n := 0
	f.st.Scan(sessionAnswersOf(sid2), "", func(string, []byte) bool { n++; return true })
	if n != MaxSessionAnswers {
		t.Errorf("answers kept without acks: %d, want %d", n, MaxSessionAnswers)
	}
	if r := applyOne(t, f, index, inSession(kvPut(1000, "acme", "k", `1`), sid2, 50, 0, "same")); r.Code != CodeIdempotencyExpired {
		t.Errorf("retry of a dropped answer: %s, want %s", describe(r), CodeIdempotencyExpired)
	}
	index++

	// Small limits: the least recently used sessions go.
	applyOne(t, f, index, NewCommand(KindLimitsSet, 2000, "", "", &Limits{SessionBytes: 3 * (sessionRecordBytes + 200), SessionsPerTenant: 2}))
	index++
	if f.sessBytes > 3*(sessionRecordBytes+200) {
		t.Errorf("after lowering the budget: %d bytes, over it", f.sessBytes)
	}
	var ids []uint64
	for i := range 3 {
		ids = append(ids, openSession(t, f, index, int64(3000+i), "beta", "p"))
		index++
	}
	asP := func(c *Command) *Command { c.Principal = "p"; return c }
	// beta may hold 2: its first session is gone.
	if r := applyOne(t, f, index, asP(inSession(kvPut(4000, "beta", "k", `1`), ids[0], 1, 1, "x"))); r.Code != CodeIdempotencyExpired {
		t.Errorf("a tenant's least recently used session past its cap: %s, want %s", describe(r), CodeIdempotencyExpired)
	}
	index++
	for _, id := range ids[1:] {
		if r := applyOne(t, f, index, asP(inSession(kvPut(4000, "beta", "k", `1`), id, 1, 1, "x"))); !r.OK() {
			t.Errorf("a live session: %s", describe(r))
		}
		index++
	}
	if f.sessBytes > 3*(sessionRecordBytes+200) {
		t.Errorf("sessions hold %d bytes, over the budget %d", f.sessBytes, 3*(sessionRecordBytes+200))
	}
	// What a replica restored from a snapshot counts is what this one does.
	g := New()
	restoreFrom(t, g, persist(t, f))
	if g.sessBytes != f.sessBytes {
		t.Errorf("restored replica counts %d session bytes, this one %d", g.sessBytes, f.sessBytes)
	}
}

// TestSessionSurvivesSnapshot: a write's answer is replayed by a replica
// restored from a snapshot taken after it.
func TestSessionSurvivesSnapshot(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	sid := openSession(t, f, 2, 1000, "acme", "")
	first := applyOne(t, f, 3, inSession(kvPut(1000, "acme", "a", `1`), sid, 1, 1, "A"))
	g := New()
	restoreFrom(t, g, persist(t, f))
	r := applyOne(t, g, 4, inSession(kvPut(1100, "acme", "a", `1`), sid, 1, 1, "A"))
	if !r.Replay || string(r.JSON()) != string(first.JSON()) {
		t.Errorf("retry after restore: %s replay %v, want the first answer", describe(r), r.Replay)
	}
}

// TestSessionsGoWithTheirPrincipal: deleting a principal drops its
// sessions, so one created again under the name cannot replay them.
func TestSessionsGoWithTheirPrincipal(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	applyOne(t, f, 2, principalCreate(1000, "acme", "bob", "h1"))
	sid := openSession(t, f, 3, 1000, "acme", "bob")
	w := inSession(kvPut(1000, "acme", "a", `1`), sid, 1, 1, "A")
	w.Principal = "bob"
	applyOne(t, f, 4, w)
	applyOne(t, f, 5, principalDelete(1000, "acme", "bob"))
	applyOne(t, f, 6, principalCreate(1000, "acme", "bob", "h2"))
	retry := inSession(kvPut(1000, "acme", "a", `1`), sid, 1, 1, "A")
	retry.Principal = "bob"
	if r := applyOne(t, f, 7, retry); r.Code != CodeIdempotencyExpired {
		t.Errorf("the new bob replaying the old bob's session: %s, want %s", describe(r), CodeIdempotencyExpired)
	}
	if f.sessBytes != 0 {
		t.Errorf("session bytes %d after the only session went", f.sessBytes)
	}
}

// TestSessionTenantBudget: with a per-tenant session budget, a tenant
// that writes more than the whole budget holds drops its own least
// recently used sessions, not another tenant's: the other tenant's write
// in flight is still answered from its session. Two replicas agree, and a
// recount finds what they kept.
func TestSessionTenantBudget(t *testing.T) {
	const total, perTenant = 1 << 20, 256 << 10
	value := `"` + strings.Repeat("x", 16<<10) + `"` // a 16 KiB answer
	f, g := New(), New()
	index := uint64(0)
	now := int64(1000)
	apply := func(c *Command) *Result {
		t.Helper()
		index++
		now += 10
		r := applyOne(t, f, index, c)
		applyOne(t, g, index, c)
		return r
	}
	open := func(tenant, principal string) uint64 {
		t.Helper()
		r := apply(NewCommand(KindSessionOpen, now, tenant, principal, &SessionOpenArgs{}))
		id, err := strconv.ParseUint(r.Obj.(SessionView).SessionID, 10, 64)
		if err != nil {
			t.Fatalf("session open: %s", describe(r))
		}
		return id
	}
	put := func(tenant, principal string, sid, seq uint64) *Result {
		c := NewCommand(KindKVPut, now, tenant, principal, &KVPutArgs{Namespace: "ns", Key: fmt.Sprint(sid, "-", seq), Value: []byte(value)})
		return apply(inSession(c, sid, seq, 0, fmt.Sprint("fp-", seq)))
	}
	apply(tenantPut(now, "victim"))
	apply(tenantPut(now, "hog"))
	apply(NewCommand(KindLimitsSet, now, "", "", &Limits{SessionBytes: total, SessionTenantBytes: perTenant}))
	vid := open("victim", "v")
	if r := put("victim", "v", vid, 1); !r.OK() {
		t.Fatalf("victim's write: %s", describe(r))
	}
	for range 8 { // 8 sessions of 10 answers of 16 KiB: more than the whole budget
		sid := open("hog", "h")
		for seq := uint64(1); seq <= 10; seq++ {
			put("hog", "h", sid, seq)
		}
	}
	if r := put("victim", "v", vid, 1); !r.OK() || !r.Replay {
		t.Errorf("victim's retry after the other tenant filled its budget: got %s (replay %v), want its first answer replayed", describe(r), r.Replay)
	}
	if got := f.sessTenantBytes["hog"]; got > perTenant {
		t.Errorf("hog's sessions: got %d bytes, want at most its budget %d", got, perTenant)
	}
	kept, keptHog := f.sessBytes, f.sessTenantBytes["hog"]
	if f.recountSessions(); f.sessBytes != kept || f.sessTenantBytes["hog"] != keptHog {
		t.Errorf("session bytes: counted %d (hog %d), the state holds %d (%d)", kept, keptHog, f.sessBytes, f.sessTenantBytes["hog"])
	}
	if a, b := f.Status().StateDigest, g.Status().StateDigest; a != b {
		t.Errorf("replicas differ: %s vs %s", a, b)
	}
}
