package fsm

import (
	"slices"
	"testing"
)

func kvArgs(key, value string) *KVPutArgs {
	return &KVPutArgs{Namespace: "ns", Key: key, Value: []byte(value)}
}

// TestKVVersions: every write of a key gets a version above every earlier
// one, also after a delete and re-create; expectations compare with the
// live version (0: absent) and a refused one reports the current version.
func TestKVVersions(t *testing.T) {
	w := newWorld(t)
	var versions []uint64
	e := w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`1`), ExpectVersion: ptr(uint64(0))}).Obj.(*KVEntry)
	versions = append(versions, e.Version)
	if d := w.refused(CodeVersionMismatch, KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`2`),
		ExpectVersion: ptr(uint64(0))}); d["current_version"] != float64(e.Version) {
		t.Errorf("create over an entry: current_version %v, want %d", d["current_version"], e.Version)
	}
	w.refused(CodeVersionMismatch, KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`2`),
		ExpectVersion: ptr(e.Version + 1)})
	e = w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`2`), ExpectVersion: &e.Version}).Obj.(*KVEntry)
	versions = append(versions, e.Version)
	e = w.ok(KindKVPut, "acme", kvArgs("k", `3`)).Obj.(*KVEntry) // no expectation: unconditional
	versions = append(versions, e.Version)

	w.refused(CodeVersionMismatch, KindKVDelete, "acme", &KVDeleteArgs{Namespace: "ns", Key: "k", ExpectVersion: ptr(e.Version - 1)})
	w.refused(CodeNotFound, KindKVDelete, "acme", &KVDeleteArgs{Namespace: "other", Key: "k"})
	if r := w.ok(KindKVDelete, "acme", &KVDeleteArgs{Namespace: "ns", Key: "k", ExpectVersion: &e.Version}); r.Outcome != OutcomeNoContent {
		t.Errorf("delete: outcome %d, want no content", r.Outcome)
	}
	if _, _, ok := w.f.GetKV("acme", "ns", "k", w.now); ok {
		t.Fatalf("deleted entry still readable")
	}
	w.refused(CodeNotFound, KindKVDelete, "acme", &KVDeleteArgs{Namespace: "ns", Key: "k"})
	e = w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "k", Value: []byte(`4`), ExpectVersion: ptr(uint64(0))}).Obj.(*KVEntry)
	versions = append(versions, e.Version)

	// Two writes in one entry get distinct, growing versions too.
	w.index++
	res := applyAt(t, w.f, w.index, NewCommand(KindKVPut, w.now, "acme", "", kvArgs("k", `5`)),
		NewCommand(KindKVPut, w.now, "acme", "", kvArgs("k", `6`)))
	for _, r := range res {
		versions = append(versions, r.Obj.(*KVEntry).Version)
	}
	if !slices.IsSorted(versions) || len(slices.Compact(slices.Clone(versions))) != len(versions) {
		t.Errorf("versions of successive writes: %v, want strictly increasing", versions)
	}
	got, _, ok := w.f.GetKV("acme", "ns", "k", w.now)
	if !ok || string(got.Value) != `6` || got.Version != versions[len(versions)-1] {
		t.Errorf("GetKV: got %+v %v, want value 6 at the last version", got, ok)
	}
	if _, _, ok := w.f.GetKV("other", "ns", "k", w.now); ok {
		t.Errorf("another tenant reads acme's entry")
	}
}

// TestKVTTL: an entry is live until its expiry by the reader's or the
// command's time; an expired entry counts as absent before it is purged,
// and kv.purge removes it and its expiry index, at most Max at a time.
func TestKVTTL(t *testing.T) {
	w := newWorld(t)
	e := w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "a", Value: []byte(`1`), TTLMs: 100}).Obj.(*KVEntry)
	if e.ExpiresAt != w.now+100 || w.f.NextKVExpiry() != e.ExpiresAt {
		t.Fatalf("expiry: entry %d, next %d, want %d", e.ExpiresAt, w.f.NextKVExpiry(), w.now+100)
	}
	if m := obj(t, &Result{Obj: e}); m["expires_at"] != FormatMillis(e.ExpiresAt) {
		t.Errorf("expires_at: got %v, want %s", m["expires_at"], FormatMillis(e.ExpiresAt))
	}
	if _, _, ok := w.f.GetKV("acme", "ns", "a", e.ExpiresAt-1); !ok {
		t.Errorf("entry not live 1 ms before its expiry")
	}
	if _, _, ok := w.f.GetKV("acme", "ns", "a", e.ExpiresAt); ok {
		t.Errorf("entry live at its expiry")
	}

	// Rewriting without a TTL drops the old expiry.
	w.ok(KindKVPut, "acme", kvArgs("a", `2`))
	if n := w.f.NextKVExpiry(); n != 0 {
		t.Errorf("after a rewrite without TTL: next expiry %d, want 0", n)
	}
	w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "a", Value: []byte(`3`), TTLMs: 50})
	w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "b", Value: []byte(`1`), TTLMs: 60})
	cExp := w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "c", Value: []byte(`1`), TTLMs: 10_000}).Obj.(*KVEntry).ExpiresAt
	w.now += 100 // a and b expired, c not

	w.refused(CodeNotFound, KindKVDelete, "acme", &KVDeleteArgs{Namespace: "ns", Key: "a"})
	if list, _, _ := w.f.ListKV("acme", "ns", "", "", 10, w.now, nil); len(list) != 1 || list[0].Key != "c" {
		t.Errorf("ListKV after expiry: got %d entries, want c only", len(list))
	}
	r := w.ok(KindKVPurge, "", &KVPurgeArgs{Max: 1})
	if n := obj(t, r)["purged"]; n != float64(1) {
		t.Errorf("purge with Max 1: purged %v", n)
	}
	r = w.ok(KindKVPurge, "", &KVPurgeArgs{Max: 10})
	if n := obj(t, r)["purged"]; n != float64(1) {
		t.Errorf("second purge: purged %v, want the other expired entry", n)
	}
	if _, ok := getKV(w.f.st, "acme", "ns", "a"); ok {
		t.Errorf("purged entry still stored")
	}
	if _, ok := getKV(w.f.st, "acme", "ns", "c"); !ok {
		t.Errorf("purge removed a live entry")
	}
	if n := w.f.NextKVExpiry(); n != cExp {
		t.Errorf("next expiry %d, want c's %d", n, cExp)
	}
	// An expired key can be created again with "must not exist".
	w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "b", Value: []byte(`2`), ExpectVersion: ptr(uint64(0))})
	w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "c", Value: []byte(`2`), TTLMs: 5})
	w.now += 100
	w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns", Key: "c", Value: []byte(`3`), ExpectVersion: ptr(uint64(0))})
	if n := w.f.NextKVExpiry(); n != 0 {
		t.Errorf("re-created without TTL: next expiry %d, want 0", n)
	}
}

// TestListKV: entries of one namespace in key order, by prefix, a page at
// a time, hiding what visible refuses.
func TestListKV(t *testing.T) {
	w := newWorld(t)
	for _, k := range []string{"b1", "a2", "a1", "a3"} {
		w.ok(KindKVPut, "acme", kvArgs(k, `1`))
	}
	w.ok(KindKVPut, "acme", &KVPutArgs{Namespace: "ns2", Key: "a0", Value: []byte(`1`)})
	keys := func(es []*KVEntry) (out []string) {
		for _, e := range es {
			out = append(out, e.Key)
		}
		return out
	}
	page, next, _ := w.f.ListKV("acme", "ns", "a", "", 2, w.now, nil)
	if got := keys(page); !slices.Equal(got, []string{"a1", "a2"}) || next != "a2" {
		t.Fatalf("first page: %v next %q, want [a1 a2] next a2", got, next)
	}
	page, next, _ = w.f.ListKV("acme", "ns", "a", next, 2, w.now, nil)
	if got := keys(page); !slices.Equal(got, []string{"a3"}) || next != "" {
		t.Errorf("second page: %v next %q, want [a3] and no next", got, next)
	}
	page, _, _ = w.f.ListKV("acme", "ns", "", "", 10, w.now, func(e *KVEntry) bool { return e.Key != "a2" })
	if got := keys(page); !slices.Equal(got, []string{"a1", "a3", "b1"}) {
		t.Errorf("visible filter: %v, want [a1 a3 b1]", got)
	}
}
