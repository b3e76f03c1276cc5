package fsm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/zstd"
)

// kindTestPutThenFail writes keys and then fails: only the FSM's rollback
// keeps its writes out of the state. Known to the tests' FSMs only: it is
// added to the handlers here, never to the command table.
const kindTestPutThenFail Kind = "test.put-then-fail"

func init() {
	handlers[kindTestPutThenFail] = func(f *FSM, _ *applyCtx, c *Command) *Result {
		f.st.Put(tenantKey("ghost"), encode(&Tenant{Name: "ghost"}))
		f.st.Delete(tenantKey(c.Tenant))
		return fail(CodeVersionMismatch, "failing after writing", map[string]any{"current": 1})
	}
}

// logOf wraps commands into a command log entry at index.
func logOf(index uint64, cmds ...*Command) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: EncodeEntry(cmds)}
}

// applyAt applies one entry and returns its results, failing the test if
// the entry was not accepted.
func applyAt(t testing.TB, f *FSM, index uint64, cmds ...*Command) []*Result {
	t.Helper()
	res, ok := f.Apply(logOf(index, cmds...)).([]*Result)
	if !ok || len(res) != len(cmds) {
		t.Fatalf("Apply at %d: got %#v, want %d results", index, res, len(cmds))
	}
	return res
}

// applyOne applies a single command at index and returns its result.
func applyOne(t testing.TB, f *FSM, index uint64, c *Command) *Result {
	t.Helper()
	return applyAt(t, f, index, c)[0]
}

func tenantPut(now int64, name string) *Command {
	return NewCommand(KindTenantPut, now, name, "", &TenantPutArgs{Name: name})
}

func principalCreate(now int64, tenant, name, hash string, grants ...Grant) *Command {
	return NewCommand(KindPrincipalCreate, now, tenant, "", &PrincipalCreateArgs{Name: name, Grants: grants,
		TokenHash: hash, TokenSalt: fmt.Sprintf("%x", hash)})
}

func principalDelete(now int64, tenant, name string) *Command {
	return NewCommand(KindPrincipalDelete, now, tenant, "", &PrincipalDeleteArgs{Name: name})
}

// idem adds an Idempotency-Key with fingerprint fp and a TTL in ms.
func idem(c *Command, principal, key, fp string, ttl int64) *Command {
	c.Principal, c.IdemKey, c.IdemFP, c.IdemTTL = principal, key, []byte(fp), ttl
	return c
}

func describe(r *Result) string {
	if r.OK() {
		return fmt.Sprintf("ok outcome=%d value=%s", r.Outcome, r.JSON())
	}
	return r.Code
}

func TestTenantPut(t *testing.T) {
	f := New()
	steps := []struct {
		name        string
		cmd         *Command
		wantCode    string
		wantOutcome Outcome
		wantValue   string
	}{
		{"create", tenantPut(1000, "acme"), "", OutcomeCreated, `{"name":"acme"}`},
		{"confirm", tenantPut(1001, "acme"), "", OutcomeOK, `{"name":"acme"}`},
		{"second tenant", tenantPut(1002, "beta"), "", OutcomeCreated, `{"name":"beta"}`},
		{"bad args", &Command{Kind: KindTenantPut, Now: 1003, Args: []byte{0xc1}}, CodeInvalidArgument, 0, ""},
		{"unknown kind", &Command{Kind: "tenant.rename", Now: 1004}, CodeInvalidArgument, 0, ""},
	}
	for i, s := range steps {
		index := uint64(i + 1)
		r := applyOne(t, f, index, s.cmd)
		if r.Code != s.wantCode {
			t.Errorf("%s: code got %q, want %q", s.name, r.Code, s.wantCode)
		}
		if r.Index != index {
			t.Errorf("%s: index got %d, want %d", s.name, r.Index, index)
		}
		if s.wantCode == "" && (r.Outcome != s.wantOutcome || string(r.JSON()) != s.wantValue) {
			t.Errorf("%s: got %s, want outcome=%d value=%s", s.name, describe(r), s.wantOutcome, s.wantValue)
		}
		if r.Replay {
			t.Errorf("%s: Replay got true, want false", s.name)
		}
	}
	if got, want := f.Tenants(), []string{"acme", "beta"}; !slices.Equal(got, want) {
		t.Errorf("Tenants: got %v, want %v", got, want)
	}
	if !f.TenantExists("acme") || f.TenantExists("gamma") {
		t.Errorf("TenantExists: got acme=%v gamma=%v, want true false", f.TenantExists("acme"), f.TenantExists("gamma"))
	}
	if st := f.Status(); st.AppliedIndex != uint64(len(steps)) || st.Clock != 1004 || st.Keys != 2 {
		t.Errorf("Status: got applied=%d clock=%d keys=%d, want %d 1004 2", st.AppliedIndex, st.Clock, st.Keys, len(steps))
	}
}

func TestPrincipalCreateDelete(t *testing.T) {
	f := New()
	grant := Grant{Resource: "kv", Prefix: "notes/", Actions: []string{"read"}}
	steps := []struct {
		name        string
		cmd         *Command
		wantCode    string
		wantOutcome Outcome
	}{
		{"create in missing tenant", principalCreate(1, "acme", "p1", "h1"), CodeNotFound, 0},
		{"tenant", tenantPut(2, "acme"), "", OutcomeCreated},
		{"create", principalCreate(3, "acme", "p1", "h1", grant), "", OutcomeCreated},
		{"create existing name", principalCreate(4, "acme", "p1", "h9"), CodeAlreadyExists, 0},
		{"reuse a token hash", principalCreate(5, "acme", "p2", "h1"), CodeInvalidArgument, 0},
		{"empty token hash", principalCreate(6, "acme", "p2", ""), CodeInvalidArgument, 0},
		{"create without grants", principalCreate(7, "acme", "p2", "h2"), "", OutcomeCreated},
		{"delete", principalDelete(8, "acme", "p1"), "", OutcomeNoContent},
		{"delete again", principalDelete(9, "acme", "p1"), CodeNotFound, 0},
		{"delete in another tenant", principalDelete(10, "beta", "p2"), CodeNotFound, 0},
		{"recreate the name with a new token", principalCreate(11, "acme", "p1", "h3"), "", OutcomeCreated},
	}
	for i, s := range steps {
		r := applyOne(t, f, uint64(i+1), s.cmd)
		if r.Code != s.wantCode || (s.wantCode == "" && r.Outcome != s.wantOutcome) {
			t.Errorf("%s: got %s, want code %q outcome %d", s.name, describe(r), s.wantCode, s.wantOutcome)
		}
		if s.name == "create" {
			var p Principal
			if err := json.Unmarshal(r.JSON(), &p); err != nil {
				t.Fatalf("create: value %s: %v", r.JSON(), err)
			}
			if p.Tenant != "acme" || p.Name != "p1" || p.TokenSalt != "6831" || len(p.Grants) != 1 || p.Grants[0].Prefix != "notes/" {
				t.Errorf("create: value got %+v, want acme/p1 with salt 6831 and the grant", p)
			}
			if bytes.Contains(r.JSON(), []byte("h1")) {
				t.Errorf("create: value %s contains the token hash, want it kept private", r.JSON())
			}
		}
		if s.name == "create without grants" && !bytes.Contains(r.JSON(), []byte(`"grants":[]`)) {
			t.Errorf("create without grants: value got %s, want \"grants\":[]", r.JSON())
		}
	}
	if p, ok := f.PrincipalByToken("h3"); !ok || p.Name != "p1" || len(p.Grants) != 0 {
		t.Errorf("PrincipalByToken(h3): got %+v %v, want the recreated p1 without grants", p, ok)
	}
	if p, ok := f.PrincipalByToken("h2"); !ok || p.Name != "p2" || p.Tenant != "acme" {
		t.Errorf("PrincipalByToken(h2): got %+v %v, want acme/p2", p, ok)
	}
	if _, ok := f.PrincipalByToken("h9"); ok {
		t.Errorf("PrincipalByToken(h9): got found, want the failed create to leave no token")
	}
	t.Run("revoked token stays revoked", func(t *testing.T) {
		// A tenant, two principals, two token index entries; the deleted
		// p1's token h1 must be gone, not point at the new p1.
		p, ok := f.PrincipalByToken("h1")
		keys := f.Status().Keys
		if ok || keys != 5 {
			t.Errorf("deleted p1's token h1: got %+v %v with %d keys, want not found with 5 keys", p, ok, keys)
		}
	})
}

func TestIdempotency(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	const ttl = 1000
	var first *Result
	var keysAfterFirst int
	steps := []struct {
		name       string
		cmd        *Command
		wantCode   string
		wantReplay bool
		check      func(t *testing.T, r *Result)
	}{
		{name: "first request", cmd: idem(principalCreate(1000, "acme", "p", "h1"), "", "k", "A", ttl),
			check: func(t *testing.T, r *Result) { first, keysAfterFirst = r, f.Status().Keys }},
		{name: "retry replays the first answer", cmd: idem(principalCreate(1500, "acme", "p", "h2"), "", "k", "A", ttl),
			wantReplay: true, check: func(t *testing.T, r *Result) {
				if r.Outcome != first.Outcome || !bytes.Equal(r.JSON(), first.JSON()) {
					t.Errorf("replay: got %s, want %s", describe(r), describe(first))
				}
				if _, ok := f.PrincipalByToken("h2"); ok {
					t.Errorf("replay applied the retry's token h2, want nothing applied")
				}
				if got := f.Status().Keys; got != keysAfterFirst {
					t.Errorf("keys after replay: got %d, want %d", got, keysAfterFirst)
				}
			}},
		{name: "same key, other request", cmd: idem(principalCreate(1600, "acme", "p", "h3"), "", "k", "B", ttl),
			wantCode: CodeIdempotencyMismatch, check: func(t *testing.T, r *Result) {
				if got := f.Status().Keys; got != keysAfterFirst {
					t.Errorf("keys after mismatch: got %d, want %d", got, keysAfterFirst)
				}
			}},
		{name: "mismatch is not remembered", cmd: idem(principalCreate(1700, "acme", "p", "h4"), "", "k", "A", ttl),
			wantReplay: true},
		{name: "same key of another principal is separate", cmd: idem(tenantPut(1800, "beta"), "someone", "k", "B", ttl)},
		{name: "same key in another tenant is separate", cmd: idem(principalCreate(1800, "beta", "p", "h5"), "", "k", "B", ttl)},
		{name: "one ms before expiry still replays", cmd: idem(principalCreate(1999, "acme", "p", "h6"), "", "k", "A", ttl),
			wantReplay: true},
		// The record expires at 1000+ttl by the leader's stamped time: the
		// request runs again, and finds the principal it created.
		{name: "after expiry runs again", cmd: idem(principalCreate(2000, "acme", "p", "h7"), "", "k", "A", ttl),
			wantCode: CodeAlreadyExists},
		{name: "and its answer is remembered", cmd: idem(principalCreate(2100, "acme", "p", "h8"), "", "k", "A", ttl),
			wantCode: CodeAlreadyExists, wantReplay: true},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := applyOne(t, f, uint64(i+2), s.cmd)
			if r.Code != s.wantCode || r.Replay != s.wantReplay {
				t.Errorf("got code %q replay %v, want %q %v", r.Code, r.Replay, s.wantCode, s.wantReplay)
			}
			if s.check != nil {
				s.check(t, r)
			}
		})
	}

	t.Run("replay carries the first index", func(t *testing.T) {
		g := New()
		applyOne(t, g, 1, tenantPut(1000, "acme"))
		r1 := applyOne(t, g, 2, idem(tenantPut(1000, "x"), "", "k", "A", ttl))
		r2 := applyOne(t, g, 7, idem(tenantPut(1100, "x"), "", "k", "A", ttl))
		if !r2.Replay {
			t.Fatalf("retry: Replay got false, want true")
		}
		if r2.Index != r1.Index {
			t.Errorf("replay index got %d, want the first answer's %d", r2.Index, r1.Index)
		}
	})
}

// TestIdempotencyExpiryUsesLeaderClock: expiry is decided by the replicated
// clock (the max Now seen), never by a replica's clock, and a stamp that
// goes back does not revive an expired record. Expired records are purged
// by later commands.
func TestIdempotencyExpiryUsesLeaderClock(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	base := f.Status().Keys
	applyOne(t, f, 2, idem(tenantPut(1000, "a"), "", "k1", "A", 1000))
	applyOne(t, f, 3, idem(tenantPut(1000, "b"), "", "k2", "A", 5000))
	if got := f.Status().Keys; got != base+8 { // two tenants, two records, each in two expiry indexes
		t.Fatalf("keys: got %d, want %d", got, base+8)
	}
	// A command stamped far later (confirming a tenant changes nothing but
	// the clock) moves the clock past k1's expiry...
	applyOne(t, f, 4, tenantPut(3000, "acme"))
	if got := f.Status().Keys; got != base+5 {
		t.Errorf("keys after the clock passed k1's expiry: got %d, want %d (k1 purged)", got, base+5)
	}
	// ...so a retry stamped earlier (a lagging leader clock) still sees it
	// expired and runs again.
	r := applyOne(t, f, 5, idem(tenantPut(1500, "a"), "", "k1", "A", 1000))
	if r.Replay || r.Outcome != OutcomeOK {
		t.Errorf("retry of expired k1: got replay=%v %s, want a new run confirming the tenant (200)", r.Replay, describe(r))
	}
	if st := f.Status(); st.Clock != 3000 {
		t.Errorf("clock: got %d, want 3000 (it never goes back)", st.Clock)
	}
	r = applyOne(t, f, 6, idem(tenantPut(1500, "b"), "", "k2", "A", 5000))
	if !r.Replay || r.Outcome != OutcomeCreated {
		t.Errorf("retry of live k2: got replay=%v %s, want the remembered 201", r.Replay, describe(r))
	}
	applyOne(t, f, 7, tenantPut(1_000_000, "acme"))
	if got := f.Status().Keys; got != base+2 {
		t.Errorf("keys after every record expired: got %d, want %d", got, base+2)
	}
}

// TestIdempotencyPurgeBacklog: a command purges at most 64 expired
// records, so a backlog drains over the following commands, and a replica
// restored from a snapshot purges the same records as one that applied the
// whole log (the purge's "nothing due yet" shortcut is not state).
func TestIdempotencyPurgeBacklog(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	base := f.Status().Keys
	index := uint64(2)
	for i := 0; i < 100; i++ {
		applyOne(t, f, index, idem(tenantPut(1000, "acme"), "", fmt.Sprintf("k%03d", i), "A", 1000))
		index++
	}
	applyOne(t, f, index, idem(tenantPut(1000, "acme"), "", "late", "A", 60_000))
	index++
	if got := f.Status().Keys; got != base+3*101 {
		t.Fatalf("keys: got %d, want %d", got, base+3*101)
	}
	snap := persist(t, f)
	replica := New()
	applyOne(t, replica, 1, tenantPut(1000, "other")) // no record: nothing will be due
	restoreFrom(t, replica, snap)

	for _, r := range []*FSM{f, replica} {
		i := index
		applyOne(t, r, i, tenantPut(5000, "acme")) // 100 records due: 64 go
		if got := r.Status().Keys; got != base+3*37 {
			t.Errorf("keys after one command past the expiry: got %d, want %d", got, base+3*37)
		}
		applyOne(t, r, i+1, tenantPut(5000, "acme")) // the other 36
		if got := r.Status().Keys; got != base+3 {
			t.Errorf("keys after two commands: got %d, want %d (only the late record)", got, base+3)
		}
		applyOne(t, r, i+2, tenantPut(61_000, "acme"))
		if got := r.Status().Keys; got != base {
			t.Errorf("keys after the late record expired: got %d, want %d", got, base)
		}
	}
	if a, b := f.Status().StateDigest, replica.Status().StateDigest; a != b {
		t.Errorf("digest: applied %s, restored %s", a, b)
	}
}

// TestFailedCommandRollsBack: a command whose handler fails leaves the
// state exactly as it was, also when other commands of the same entry
// succeed.
func TestFailedCommandRollsBack(t *testing.T) {
	f := New()
	applyAt(t, f, 1, tenantPut(1000, "acme"), principalCreate(1000, "acme", "p", "h"))
	cases := []struct {
		name string
		cmd  *Command
		code string
	}{
		{"writes then fails", &Command{Kind: kindTestPutThenFail, Now: 1000, Tenant: "acme", Args: encode(struct{}{})}, CodeVersionMismatch},
		{"principal in missing tenant", principalCreate(1000, "nope", "p", "h2"), CodeNotFound},
		{"duplicate principal", principalCreate(900, "acme", "p", "h3"), CodeAlreadyExists},
		{"delete missing principal", principalDelete(1000, "acme", "q"), CodeNotFound},
		{"member without id", NewCommand(KindMemberSet, 1000, "", "", &Member{}), CodeInvalidArgument},
		{"undecodable args", &Command{Kind: KindPrincipalCreate, Now: 1000, Tenant: "acme", Args: []byte("\x92")}, CodeInvalidArgument},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.Status()
			r := applyOne(t, f, uint64(i+2), tc.cmd)
			if r.Code != tc.code {
				t.Errorf("code: got %q, want %q", r.Code, tc.code)
			}
			after := f.Status()
			if after.StateDigest != before.StateDigest || after.Keys != before.Keys {
				t.Errorf("state: got %s (%d keys), want unchanged %s (%d keys)", after.StateDigest, after.Keys, before.StateDigest, before.Keys)
			}
			if got := f.Tenants(); !slices.Equal(got, []string{"acme"}) {
				t.Errorf("tenants: got %v, want [acme]", got)
			}
		})
	}
	t.Run("details survive", func(t *testing.T) {
		r := applyOne(t, f, 100, &Command{Kind: kindTestPutThenFail, Now: 1000, Tenant: "acme"})
		if string(r.Details) != `{"current":1}` {
			t.Errorf("details: got %s, want {\"current\":1}", r.Details)
		}
	})
	t.Run("one entry, one failing command of three", func(t *testing.T) {
		res := applyAt(t, f, 101, tenantPut(1000, "b1"),
			&Command{Kind: kindTestPutThenFail, Now: 1000, Tenant: "b1"}, tenantPut(1000, "b2"))
		if got := []string{describe(res[0]), res[1].Code, describe(res[2])}; got[1] != CodeVersionMismatch || !res[0].OK() || !res[2].OK() {
			t.Errorf("results: got %v, want ok, version_mismatch, ok", got)
		}
		if got, want := f.Tenants(), []string{"acme", "b1", "b2"}; !slices.Equal(got, want) {
			t.Errorf("tenants: got %v, want %v", got, want)
		}
		for _, r := range res {
			if r.Index != 101 {
				t.Errorf("result index: got %d, want 101", r.Index)
			}
		}
	})
}

// TestBadEntries: an entry that does not decode is answered with an error,
// identically on every replica; it still counts as applied.
func TestBadEntries(t *testing.T) {
	many := make([]*Command, MaxCommandsPerEntry+1)
	for i := range many {
		many[i] = tenantPut(1, "t")
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"unknown version", append([]byte{EntryVersionLatest + 1}, encode([]*Command{tenantPut(1, "t")})...)},
		{"session fields in version 1", append([]byte{EntryVersion}, encode([]*Command{{Kind: KindTenantPut, Session: 1, Seq: 1}})...)},
		{"version only", []byte{EntryVersion}},
		{"not msgpack", append([]byte{EntryVersion}, "hello"...)},
		{"zero commands", append([]byte{EntryVersion}, encode([]*Command{})...)},
		{"nil command", append([]byte{EntryVersion}, encode([]*Command{tenantPut(1, "t"), nil})...)},
		{"too many commands", append([]byte{EntryVersion}, encode(many)...)},
		{"truncated", EncodeEntry([]*Command{tenantPut(1, "acme")})[:10]},
	}
	f := New()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeEntry(tc.data); !errors.Is(err, ErrBadEntry) {
				t.Errorf("DecodeEntry: got %v, want ErrBadEntry", err)
			}
			before := f.Status()
			index := uint64(i + 1)
			out := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: tc.data})
			if err, ok := out.(error); !ok || !errors.Is(err, ErrBadEntry) {
				t.Errorf("Apply: got %#v, want an ErrBadEntry error", out)
			}
			after := f.Status()
			if after.StateDigest != before.StateDigest || after.AppliedIndex != index {
				t.Errorf("status: got applied %d digest %s, want %d and unchanged %s", after.AppliedIndex, after.StateDigest, index, before.StateDigest)
			}
		})
	}
	t.Run("non-command entries only advance the index", func(t *testing.T) {
		before := f.Status()
		out := f.ApplyBatch([]*raft.Log{{Index: 50, Type: raft.LogConfiguration, Data: []byte("cfg")}})
		if out[0] != nil {
			t.Errorf("response: got %#v, want nil", out[0])
		}
		if after := f.Status(); after.AppliedIndex != 50 || after.StateDigest != before.StateDigest {
			t.Errorf("status: got %d %s, want 50 %s", after.AppliedIndex, after.StateDigest, before.StateDigest)
		}
	})
}

func TestEncodeDecodeEntry(t *testing.T) {
	cmds := []*Command{
		idem(principalCreate(42, "acme", "p", "h", Grant{Resource: "*", Actions: []string{"read"}}), "ops", "key", "fp", 99),
		tenantPut(43, "beta"),
	}
	got, err := DecodeEntry(EncodeEntry(cmds))
	if err != nil {
		t.Fatalf("DecodeEntry: %v", err)
	}
	if len(got) != 2 || got[0].Kind != KindPrincipalCreate || got[0].Now != 42 || got[0].Principal != "ops" ||
		got[0].IdemKey != "key" || string(got[0].IdemFP) != "fp" || got[0].IdemTTL != 99 || !bytes.Equal(got[0].Args, cmds[0].Args) ||
		got[1].Tenant != "beta" {
		t.Errorf("round trip: got %+v %+v, want %+v %+v", got[0], got[1], cmds[0], cmds[1])
	}
	if !bytes.Equal(EncodeEntry(cmds), EncodeEntry(got)) {
		t.Errorf("re-encoding a decoded entry changed its bytes")
	}
}

func TestMembers(t *testing.T) {
	f := New()
	applyOne(t, f, 1, NewCommand(KindMemberSet, 1, "", "", &Member{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1"}))
	applyOne(t, f, 2, NewCommand(KindMemberSet, 2, "", "", &Member{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2"}))
	applyOne(t, f, 3, NewCommand(KindMemberSet, 3, "", "", &Member{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1b"}))
	if r := applyOne(t, f, 4, NewCommand(KindMemberDelete, 4, "", "", &MemberDeleteArgs{ID: "n2"})); r.Outcome != OutcomeNoContent {
		t.Errorf("member delete: got %s, want 204", describe(r))
	}
	got := f.Members()
	if len(got) != 1 || got["n1"].HTTPAddr != "h1b" {
		t.Errorf("Members: got %v, want only n1 at h1b", got)
	}
	if len(f.Tenants()) != 0 {
		t.Errorf("Tenants: got %v, want none (members are not tenants)", f.Tenants())
	}
}

func TestWaitApplied(t *testing.T) {
	f := New()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- f.WaitApplied(ctx, 2)
	}()
	applyOne(t, f, 1, tenantPut(1, "a"))
	applyOne(t, f, 2, tenantPut(1, "b"))
	if err := <-done; err != nil {
		t.Errorf("WaitApplied(2): got %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.WaitApplied(ctx, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitApplied(3) with a cancelled context: got %v, want context.Canceled", err)
	}
	if err := f.WaitApplied(ctx, 2); err != nil {
		t.Errorf("WaitApplied(2) when already applied: got %v, want nil", err)
	}
}

// TestSameLogSameState: replicas fed the same log, one entry at a time, in
// batches of any size, or from a snapshot taken midway, hold the same state
// and give the same answers. Failures print the seed.
func TestSameLogSameState(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			logs := randomLog(seed, 300)
			one, batched := New(), New()
			var answers [][]*Result
			for _, l := range logs {
				res, _ := one.Apply(l).([]*Result)
				answers = append(answers, res)
			}
			rng := rand.New(rand.NewPCG(seed, 1))
			for i := 0; i < len(logs); {
				j := min(len(logs), i+1+rng.IntN(20))
				for k, out := range batched.ApplyBatch(logs[i:j]) {
					res, _ := out.([]*Result)
					for c := range res {
						if a, b := describe(answers[i+k][c]), describe(res[c]); a != b || answers[i+k][c].Replay != res[c].Replay {
							t.Fatalf("entry %d command %d: batched answer %s, want %s", logs[i+k].Index, c, b, a)
						}
					}
				}
				i = j
			}
			want, got := one.Status(), batched.Status()
			if got.StateDigest != want.StateDigest || got.AppliedIndex != want.AppliedIndex || got.Keys != want.Keys {
				t.Fatalf("batched replica: got %d %s (%d keys), want %d %s (%d keys)",
					got.AppliedIndex, got.StateDigest, got.Keys, want.AppliedIndex, want.StateDigest, want.Keys)
			}
			if want.Keys < 10 {
				t.Fatalf("only %d keys after %d entries: the generated log exercises too little", want.Keys, len(logs))
			}

			// A replica restored from a snapshot at the middle, then fed the
			// tail, reaches the same state.
			mid, restored := New(), New()
			for _, l := range logs[:len(logs)/2] {
				mid.Apply(l)
			}
			restoreFrom(t, restored, persist(t, mid))
			for _, l := range logs[len(logs)/2:] {
				restored.Apply(l)
			}
			if got := restored.Status(); got.StateDigest != want.StateDigest || got.AppliedIndex != want.AppliedIndex {
				t.Fatalf("restored replica: got %d %s, want %d %s", got.AppliedIndex, got.StateDigest, want.AppliedIndex, want.StateDigest)
			}
			// What each replica counts of sessions is what the state says.
			for _, r := range []*FSM{one, batched, restored} {
				kept := r.sessBytes
				if r.recountSessions(); r.sessBytes != kept {
					t.Fatalf("a replica counted %d session bytes, its state holds %d", kept, r.sessBytes)
				}
				keptIdem := r.idemBytes
				if r.recountIdem(); r.idemBytes != keptIdem {
					t.Fatalf("a replica counted %d idempotency bytes, its state holds %d", keptIdem, r.idemBytes)
				}
			}
			applied, replayed := 0, 0
			for i, l := range logs {
				cmds, _ := DecodeEntry(l.Data)
				for j, c := range cmds {
					if r := answers[i][j]; c.Session != 0 && r.OK() {
						if r.Replay {
							replayed++
						} else {
							applied++
						}
					}
				}
			}
			if applied < 5 || replayed < 1 {
				t.Fatalf("session writes: %d applied, %d replayed: the generated log exercises too little", applied, replayed)
			}
		})
	}
}

// memSink is a raft.SnapshotSink writing to memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

// persist snapshots f and returns the persisted bytes.
func persist(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink: got closed=%v cancelled=%v, want closed only", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func restoreFrom(t testing.TB, f *FSM, b []byte) {
	t.Helper()
	if err := f.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	src := New()
	for _, l := range randomLog(42, 200) {
		src.Apply(l)
	}
	applyAt(t, src, 10_000, tenantPut(1_800_000_000_000, "acme"), principalCreate(1_800_000_000_000, "acme", "p", "tokhash"))
	want := src.Status()

	snap, err := src.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	// Writes after Snapshot returns are not in it (copy-on-write clone).
	applyOne(t, src, 10_001, tenantPut(1_800_000_000_001, "later"))
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	snap.Release()

	dst := New()
	applyOne(t, dst, 1, tenantPut(5, "stale-tenant")) // Restore discards this
	restoreFrom(t, dst, sink.Bytes())
	got := dst.Status()
	if got.StateDigest != want.StateDigest || got.AppliedIndex != want.AppliedIndex || got.Keys != want.Keys || got.Clock != want.Clock {
		t.Errorf("restored: got %d %s (%d keys, clock %d), want %d %s (%d keys, clock %d)",
			got.AppliedIndex, got.StateDigest, got.Keys, got.Clock, want.AppliedIndex, want.StateDigest, want.Keys, want.Clock)
	}
	if got.RestoredIndex != want.AppliedIndex {
		t.Errorf("RestoredIndex: got %d, want %d", got.RestoredIndex, want.AppliedIndex)
	}
	if dst.TenantExists("stale-tenant") || dst.TenantExists("later") || !dst.TenantExists("acme") {
		t.Errorf("restored tenants: got %v, want acme and no stale-tenant or later", dst.Tenants())
	}
	if p, ok := dst.PrincipalByToken("tokhash"); !ok || p.Name != "p" {
		t.Errorf("restored token index: got %+v %v, want principal p", p, ok)
	}

	// The same next command gives the same answer and digest on both.
	a := New()
	restoreFrom(t, a, sink.Bytes())
	ra := applyOne(t, a, 10_001, tenantPut(1_800_000_000_001, "later"))
	rb := applyOne(t, src, 10_002, tenantPut(1_800_000_000_001, "later"))
	if describe(ra) != "ok outcome=1 value={\"name\":\"later\"}" || describe(rb) != "ok outcome=0 value={\"name\":\"later\"}" {
		t.Errorf("answers: got %s and %s, want 201 on the restored copy and 200 on the source", describe(ra), describe(rb))
	}

	// Backup writes the same format.
	var backup bytes.Buffer
	if err := a.Backup(&backup); err != nil {
		t.Fatalf("Backup: %v", err)
	}
	b := New()
	restoreFrom(t, b, backup.Bytes())
	if b.Status().StateDigest != a.Status().StateDigest {
		t.Errorf("backup restore digest: got %s, want %s", b.Status().StateDigest, a.Status().StateDigest)
	}
}

// craftSnapshot writes a snapshot stream from parts, valid or not.
func craftSnapshot(t testing.TB, hdr any, items []snapItem, trailer any) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	enc := codec.NewEncoder(zw, mh)
	for _, v := range append(append([]any{hdr}, anySlice(items)...), trailer) {
		if v == nil {
			continue
		}
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func anySlice(items []snapItem) []any {
	out := make([]any, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

func TestCorruptSnapshotRejected(t *testing.T) {
	src := New()
	applyAt(t, src, 7, tenantPut(1000, "acme"), tenantPut(1000, "beta"), principalCreate(1000, "acme", "p", "h"))
	good := persist(t, src)
	st := src.Status()
	items := []snapItem{}
	src.st.ascend(func(k string, v []byte) bool { items = append(items, snapItem{K: k, V: v}); return true })
	hdr := &snapHeader{Format: snapshotFormat, Applied: st.AppliedIndex, Clock: st.Clock, Count: len(items)}
	trailer := &snapTrailer{Digest: st.StateDigest}

	tampered := slices.Clone(items)
	tampered[0].V = append([]byte("x"), tampered[0].V...)
	reordered := slices.Clone(items)
	reordered[0], reordered[1] = reordered[1], reordered[0]
	dup := append(slices.Clone(items[:1]), items[:len(items)-1]...)
	flipped := slices.Clone(good)
	flipped[len(flipped)/2] ^= 0x40

	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"garbage", []byte("this is not a snapshot")},
		{"truncated", good[:len(good)/2]},
		{"flipped byte", flipped},
		{"valid control", craftSnapshot(t, hdr, items, trailer)},
		{"tampered value", craftSnapshot(t, hdr, tampered, trailer)},
		{"keys out of order", craftSnapshot(t, hdr, reordered, trailer)},
		{"duplicate key", craftSnapshot(t, hdr, dup, trailer)},
		{"missing trailer", craftSnapshot(t, hdr, items, nil)},
		{"count too high", craftSnapshot(t, &snapHeader{Format: snapshotFormat, Applied: st.AppliedIndex, Clock: st.Clock, Count: len(items) + 1}, items, trailer)},
		{"negative count", craftSnapshot(t, &snapHeader{Format: snapshotFormat, Count: -1}, nil, trailer)},
		{"unknown format", craftSnapshot(t, &snapHeader{Format: snapshotFormatLatest + 1, Applied: st.AppliedIndex, Clock: st.Clock, Count: len(items)}, items, trailer)},
		{"other clock", craftSnapshot(t, &snapHeader{Format: snapshotFormat, Applied: st.AppliedIndex, Clock: st.Clock + 1, Count: len(items)}, items, trailer)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := New()
			applyOne(t, dst, 1, tenantPut(5, "mine"))
			before := dst.Status()
			err := dst.Restore(io.NopCloser(bytes.NewReader(tc.data)))
			if tc.name == "valid control" {
				if err != nil || dst.Status().StateDigest != st.StateDigest {
					t.Fatalf("valid crafted snapshot: got %v, digest %s, want nil, %s", err, dst.Status().StateDigest, st.StateDigest)
				}
				return
			}
			if err == nil {
				t.Fatalf("Restore: got nil, want an error")
			}
			if !errors.Is(err, ErrBadSnapshot) {
				t.Errorf("Restore: got %v, want an error wrapping ErrBadSnapshot", err)
			}
			if after := dst.Status(); after != before || !dst.TenantExists("mine") {
				t.Errorf("after a rejected restore: got %+v, want the state unchanged %+v", after, before)
			}
		})
	}
}

// TestTaskJSONFieldsValidated: a committed task command whose payload or
// result is not JSON is refused as invalid_argument; it must not panic
// Apply, which would stop every replica at the same entry.
func TestTaskJSONFieldsValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  *Command
	}{
		{"create payload", NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "x", Queue: "q", Payload: []byte("not json")})},
		{"create payload with trailing data", NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "x", Queue: "q", Payload: []byte("{} 0")})},
		{"update result", NewCommand(KindTaskUpdate, 1, "acme", "", &TaskUpdateArgs{ID: "t1", Result: []byte("{")})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			applyAt(t, f, 1, tenantPut(1, "acme"), NewCommand(KindTaskCreate, 1, "acme", "", &TaskCreateArgs{ID: "t1", Queue: "q"}))
			before := f.Status()
			r := applyOne(t, f, 2, tc.cmd)
			if r.Code != CodeInvalidArgument {
				t.Errorf("code: got %q, want invalid_argument", r.Code)
			}
			if after := f.Status(); after.Keys != before.Keys {
				t.Errorf("keys: got %d, want %d", after.Keys, before.Keys)
			}
		})
	}
}

// TestPrincipalCacheFollowsChanges: lookups are cached, and a cached
// principal never outlives its revocation, its re-creation under the same
// name, or an aborted change's rollback.
func TestPrincipalCacheFollowsChanges(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1, "acme"))
	applyOne(t, f, 2, principalCreate(2, "acme", "p1", "h1"))
	for range 2 { // the second lookup is served from the cache
		if p, ok := f.PrincipalByToken("h1"); !ok || p.Name != "p1" {
			t.Fatalf("PrincipalByToken(h1): %+v %v, want p1", p, ok)
		}
	}
	applyOne(t, f, 3, principalDelete(3, "acme", "p1"))
	if p, ok := f.PrincipalByToken("h1"); ok {
		t.Fatalf("PrincipalByToken(h1) after the delete: got %+v, want not found", p)
	}
	applyOne(t, f, 4, principalCreate(4, "acme", "p1", "h2"))
	if p, ok := f.PrincipalByToken("h1"); ok {
		t.Fatalf("old token h1 after p1 was re-created: got %+v, want not found", p)
	}
	if p, ok := f.PrincipalByToken("h2"); !ok || p.Name != "p1" {
		t.Fatalf("PrincipalByToken(h2): %+v %v, want the new p1", p, ok)
	}
	// Restoring a snapshot replaces every record: the cache must follow.
	other := New()
	applyOne(t, other, 1, tenantPut(1, "acme"))
	applyOne(t, other, 2, principalCreate(2, "acme", "p1", "h3"))
	snap, err := other.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(io.NopCloser(&sink.Buffer)); err != nil {
		t.Fatal(err)
	}
	if p, ok := f.PrincipalByToken("h2"); ok {
		t.Fatalf("h2 after restoring a snapshot without it: got %+v, want not found", p)
	}
	if p, ok := f.PrincipalByToken("h3"); !ok || p.Name != "p1" {
		t.Fatalf("h3 after the restore: %+v %v, want p1", p, ok)
	}
}

// TestPrincipalCacheDropsRetiredTokens: a token that was deleted or
// rotated away leaves the lookup cache when the change applies, not when
// someone presents it again (which may be never): the cache holds at most
// one entry per principal, however many rotations a long-lived node sees,
// and a restore empties it.
func TestPrincipalCacheDropsRetiredTokens(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1, "acme"))
	cached := func() []string {
		var hs []string
		f.principals.Range(func(k, _ any) bool { hs = append(hs, k.(string)); return true })
		slices.Sort(hs)
		return hs
	}
	lookup := func(h string) {
		t.Helper()
		if _, ok := f.PrincipalByToken(h); !ok {
			t.Fatalf("PrincipalByToken(%s): not found", h)
		}
	}
	applyOne(t, f, 2, principalCreate(2, "acme", "p1", "h1"))
	applyOne(t, f, 3, principalCreate(3, "acme", "p2", "h2"))
	lookup("h1")
	lookup("h2")
	index := uint64(4)
	for i := range 100 {
		h := fmt.Sprintf("h1-%d", i)
		r := applyOne(t, f, index, NewCommand(KindPrincipalRotate, int64(index), "acme", "", &PrincipalRotateArgs{Name: "p1", TokenHash: h, TokenSalt: "s"}))
		if !r.OK() {
			t.Fatalf("rotate: %s", describe(r))
		}
		index++
		lookup(h)
	}
	if got, want := cached(), []string{"h1-99", "h2"}; !slices.Equal(got, want) {
		t.Errorf("after 100 rotations of p1 the cache holds %v, want %v", got, want)
	}
	applyOne(t, f, index, principalDelete(int64(index), "acme", "p2"))
	if got, want := cached(), []string{"h1-99"}; !slices.Equal(got, want) {
		t.Errorf("after p2 was deleted the cache holds %v, want %v", got, want)
	}
	snap, err := New().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(io.NopCloser(&sink.Buffer)); err != nil {
		t.Fatal(err)
	}
	if got := cached(); len(got) != 0 {
		t.Errorf("after a restore the cache holds %v, want nothing", got)
	}
}

// A rotation replaces a principal's token at its log index: the old hash
// finds nobody from then on, the new one the same principal with its
// grants; two replicas applying the same log reach the same state.
func TestPrincipalRotate(t *testing.T) {
	grant := Grant{Resource: "kv", Prefix: "notes/", Actions: []string{"read"}}
	rotate := func(now int64, tenant, name, hash string) *Command {
		return NewCommand(KindPrincipalRotate, now, tenant, "", &PrincipalRotateArgs{Name: name, TokenHash: hash, TokenSalt: "s-" + hash})
	}
	log := []*Command{
		tenantPut(1, "acme"),
		principalCreate(2, "acme", "p1", "h1", grant),
		principalCreate(3, "acme", "p2", "h2"),
		rotate(4, "acme", "p1", "h1b"),
		rotate(5, "acme", "nobody", "h9"),
		rotate(6, "acme", "p1", "h2"),  // another principal's token hash
		rotate(7, "acme", "p1", ""),    // empty
		rotate(8, "beta", "p1", "h10"), // another tenant
	}
	want := []string{"", "", "", "", CodeNotFound, CodeInvalidArgument, CodeInvalidArgument, CodeNotFound}
	a, b := New(), New()
	for i, c := range log {
		ra := applyOne(t, a, uint64(i+1), c)
		rb := applyOne(t, b, uint64(i+1), c)
		if ra.Code != want[i] || rb.Code != want[i] {
			t.Errorf("command %d (%s): got %s / %s, want code %q", i, c.Kind, describe(ra), describe(rb), want[i])
		}
		if i == 3 {
			var p Principal
			if err := json.Unmarshal(ra.JSON(), &p); err != nil || p.Name != "p1" || p.TokenSalt != "s-h1b" || len(p.Grants) != 1 {
				t.Errorf("rotate: value %s (%v), want p1 with the new salt and its grant", ra.JSON(), err)
			}
			if bytes.Contains(ra.JSON(), []byte(`"h1b"`)) {
				t.Errorf("rotate: value %s contains the token hash", ra.JSON())
			}
		}
	}
	if _, ok := a.PrincipalByToken("h1"); ok {
		t.Error("the rotated-out token still finds its principal")
	}
	if p, ok := a.PrincipalByToken("h1b"); !ok || p.Name != "p1" || len(p.Grants) != 1 {
		t.Errorf("the new token: got %+v %v, want p1 with its grant", p, ok)
	}
	if p, ok := a.PrincipalByToken("h2"); !ok || p.Name != "p2" {
		t.Errorf("p2's token after a refused rotation: got %+v %v", p, ok)
	}
	if ps := a.Principals("acme"); len(ps) != 2 || ps[0].Name != "p1" || ps[1].Name != "p2" {
		t.Errorf("Principals: got %+v, want p1, p2", ps)
	}
	if sa, sb := a.Status(), b.Status(); sa.StateDigest != sb.StateDigest {
		t.Errorf("replicas differ: %s vs %s", sa.StateDigest, sb.StateDigest)
	}
}

// A principal's delete with DropKeys drops its Idempotency-Key records and
// their bytes (another principal's stay), so that a principal created
// again under the name applies the same key anew; a delete without it (an
// entry before version 5) keeps them, as it always did.
func TestPrincipalDeleteDropsKeys(t *testing.T) {
	kvPut := func(now int64, principal, key string) *Command {
		return idem(NewCommand(KindKVPut, now, "acme", principal, &KVPutArgs{Namespace: "n", Key: key, Value: []byte(`1`)}), principal, key, "fp-"+key, 60_000)
	}
	for _, tc := range []struct {
		name       string
		dropKeys   bool
		wantReplay bool
	}{
		{"with DropKeys", true, false},
		{"without DropKeys (older entries)", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			log := []*Command{tenantPut(1, "acme"), principalCreate(2, "acme", "p", "hp"), principalCreate(3, "acme", "q", "hq"),
				kvPut(4, "p", "k1"), kvPut(5, "p", "k2"), kvPut(6, "q", "k1"),
				NewCommand(KindPrincipalDelete, 7, "acme", "", &PrincipalDeleteArgs{Name: "p", DropKeys: tc.dropKeys}),
				principalCreate(8, "acme", "p", "hp2")}
			for i, c := range log {
				if r := applyOne(t, f, uint64(i+1), c); !r.OK() {
					t.Fatalf("command %d (%s): got %s, want success", i, c.Kind, describe(r))
				}
			}
			if _, ok := f.st.Get(idemKey("acme", "p", "k1")); ok == !tc.wantReplay {
				t.Errorf("p's record after the delete: got kept %v, want %v", ok, tc.wantReplay)
			}
			if _, ok := f.st.Get(idemKey("acme", "q", "k1")); !ok {
				t.Errorf("q's record after p's delete: got dropped, want kept")
			}
			kept, keptTenant := f.idemBytes, f.idemTenantBytes["acme"]
			if f.recountIdem(); f.idemBytes != kept || f.idemTenantBytes["acme"] != keptTenant {
				t.Errorf("idempotency bytes: counted %d (tenant %d), state holds %d (%d)", kept, keptTenant, f.idemBytes, f.idemTenantBytes["acme"])
			}
			r := applyOne(t, f, uint64(len(log)+1), kvPut(9, "p", "k1"))
			if !r.OK() || r.Replay != tc.wantReplay {
				t.Errorf("the re-created p's put with k1: got %s (replay %v), want success with replay %v", describe(r), r.Replay, tc.wantReplay)
			}
		})
	}
	if got := (&PrincipalDeleteArgs{Name: "p", DropKeys: true}).entryVersion(); got != EntryVersion5 {
		t.Errorf("entry version with DropKeys: got %d, want %d", got, EntryVersion5)
	}
}

// A rotation by a principal (ByGrants) is decided against the grants as
// the command applies: a target re-created with wider grants after the
// handler looked, or a caller deleted meanwhile, is forbidden; the admin
// (no Principal) and rotations without ByGrants are not checked.
func TestPrincipalRotateByGrants(t *testing.T) {
	adminAll := Grant{Resource: "admin", Prefix: "", Actions: []string{"read", "write", "delete"}}
	kvBot := Grant{Resource: "kv", Prefix: "bot/", Actions: []string{"read", "write"}}
	everything := Grant{Resource: "*", Prefix: "", Actions: []string{"read", "write", "delete"}}
	rotate := func(now int64, by, name, hash string, byGrants bool) *Command {
		return NewCommand(KindPrincipalRotate, now, "acme", by, &PrincipalRotateArgs{Name: name, TokenHash: hash, TokenSalt: "s-" + hash, ByGrants: byGrants})
	}
	cases := []struct {
		name     string
		setup    []*Command
		rotation *Command
		wantCode string
	}{
		{"target covered", []*Command{principalCreate(2, "acme", "boss", "hb", kvBot)},
			rotate(9, "ops", "boss", "hn", true), ""},
		{"target wider", []*Command{principalCreate(2, "acme", "boss", "hb", everything)},
			rotate(9, "ops", "boss", "hn", true), CodeForbidden},
		{"target re-created wider after the check", []*Command{principalCreate(2, "acme", "boss", "hb", kvBot),
			principalDelete(3, "acme", "boss"), principalCreate(4, "acme", "boss", "hb2", everything)},
			rotate(9, "ops", "boss", "hn", true), CodeForbidden},
		{"caller deleted", []*Command{principalCreate(2, "acme", "boss", "hb", kvBot), principalDelete(3, "acme", "ops")},
			rotate(9, "ops", "boss", "hn", true), CodeForbidden},
		{"caller without an admin grant on the name", []*Command{principalCreate(2, "acme", "boss", "hb"),
			principalCreate(3, "acme", "kvonly", "hk", kvBot)},
			rotate(9, "kvonly", "boss", "hn", true), CodeForbidden},
		{"admin token", []*Command{principalCreate(2, "acme", "boss", "hb", everything)},
			rotate(9, "", "boss", "hn", true), ""},
		{"without ByGrants (older entries)", []*Command{principalCreate(2, "acme", "boss", "hb", everything)},
			rotate(9, "ops", "boss", "hn", false), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			log := append([]*Command{tenantPut(1, "acme"), principalCreate(1, "acme", "ops", "ho", adminAll, kvBot)}, tc.setup...)
			for i, c := range log {
				if r := applyOne(t, f, uint64(i+1), c); !r.OK() {
					t.Fatalf("setup command %d (%s): got %s, want success", i, c.Kind, describe(r))
				}
			}
			r := applyOne(t, f, uint64(len(log)+1), tc.rotation)
			if r.Code != tc.wantCode {
				t.Fatalf("rotation: got %s, want code %q", describe(r), tc.wantCode)
			}
			if _, ok := f.PrincipalByToken("hn"); ok != (tc.wantCode == "") {
				t.Errorf("new token known: got %v, want %v", ok, tc.wantCode == "")
			}
		})
	}
	a := &PrincipalRotateArgs{Name: "boss", ByGrants: true}
	if got := a.entryVersion(); got != EntryVersion5 {
		t.Errorf("entry version with ByGrants: got %d, want %d", got, EntryVersion5)
	}
	if got := (&PrincipalRotateArgs{Name: "boss"}).entryVersion(); got != 0 {
		t.Errorf("entry version without ByGrants: got %d, want 0", got)
	}
}
