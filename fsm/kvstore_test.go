package fsm

import (
	"encoding/json"
	"slices"
	"testing"
)

func storePut(ns []string, key, value string) StoreWriteOp {
	return StoreWriteOp{NS: ns, Key: key, Value: []byte(value)}
}

func storeKeys(items []*StoreItemJSON) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Key)
	}
	return out
}

// TestStoreItems: put, update (created_at kept, updated_at moves), delete,
// several gets at once, and labels that share leading characters or hold
// the characters the key encoding escapes.
func TestStoreItems(t *testing.T) {
	w := newWorld(t)
	a := []string{"users", "a/b%c\x00"}
	w.ok(KindStoreWrite, "acme", &StoreWriteArgs{Ops: []StoreWriteOp{storePut(a, "k", `{"v":1}`),
		storePut([]string{"users", "a"}, "k", `{"v":2}`)}})
	w.ok(KindStoreWrite, "acme", &StoreWriteArgs{Ops: []StoreWriteOp{storePut(a, "k", `{"v":3}`)}})
	got, _, _ := w.f.GetStoreItems("acme", []StoreRef{{a, "k"}, {[]string{"users", "a"}, "k"}, {[]string{"users"}, "k"}}, w.now)
	if got[0] == nil || string(got[0].Value) != `{"v":3}` || got[0].CreatedAt == got[0].UpdatedAt {
		t.Fatalf("updated item: %+v, want v 3 with its first created_at", got[0])
	}
	if got[1] == nil || string(got[1].Value) != `{"v":2}` || got[2] != nil {
		t.Fatalf("other items: %+v %+v", got[1], got[2])
	}
	w.now -= 100 // a leader whose clock is behind: updated_at still grows
	w.ok(KindStoreWrite, "acme", &StoreWriteArgs{Ops: []StoreWriteOp{storePut(a, "k", `{"v":4}`)}})
	if again, _, _ := w.f.GetStoreItems("acme", []StoreRef{{a, "k"}}, w.now); again[0].UpdatedAt <= got[0].UpdatedAt {
		t.Errorf("updated_at %s after %s", again[0].UpdatedAt, got[0].UpdatedAt)
	}
	if !slices.Equal(got[0].Namespace, a) {
		t.Errorf("namespace %q, want %q", got[0].Namespace, a)
	}
	if ns, _, _ := w.f.ListStoreNamespaces("acme", nil, 0, 10, 0, 100, nil); len(ns) != 2 || !slices.Contains(ns[1], "a/b%c\x00") && !slices.Contains(ns[0], "a/b%c\x00") {
		t.Errorf("namespaces %q", ns)
	}
	w.ok(KindStoreWrite, "acme", &StoreWriteArgs{Ops: []StoreWriteOp{{NS: a, Key: "k"}}})
	if got, _, _ := w.f.GetStoreItems("acme", []StoreRef{{a, "k"}}, w.now); got[0] != nil {
		t.Errorf("deleted item still read: %+v", got[0])
	}
	if ns, _, _ := w.f.ListStoreNamespaces("acme", nil, 0, 10, 0, 100, nil); len(ns) != 1 {
		t.Errorf("namespaces after the delete: %q, want one", ns)
	}
	w.refused(CodeInvalidArgument, KindStoreWrite, "acme", &StoreWriteArgs{Ops: []StoreWriteOp{storePut([]string{"a.b"}, "k", `{}`)}})
	w.refused(CodeInvalidArgument, KindStoreWrite, "acme", &StoreWriteArgs{Ops: []StoreWriteOp{storePut([]string{"ok"}, "k", `{}`), storePut(nil, "k", `{}`)}})
}

// TestStoreSearch: prefix at label boundaries, filters, order, offset and
// limit, k-nearest by cosine, and the scan bound.
func TestStoreSearch(t *testing.T) {
	w := newWorld(t)
	put := func(ns []string, key, v string, vecs ...[]float32) {
		w.ok(KindStoreWrite, "acme", &StoreWriteArgs{Ops: []StoreWriteOp{{NS: ns, Key: key, Value: []byte(v), Vectors: vecs}}})
	}
	put([]string{"foo"}, "a", `{"n":1,"c":"red"}`, []float32{1, 0})
	put([]string{"foo", "child"}, "b", `{"n":2,"c":"red","o":{"x":1}}`, []float32{0, 1}, []float32{1, 1})
	put([]string{"foobar"}, "c", `{"n":3,"c":"blue"}`)
	search := func(q StoreQuery) []string {
		t.Helper()
		if q.Limit == 0 {
			q.Limit = 10
		}
		q.MaxScan = 100
		out, _, _, _ := w.f.SearchStore("acme", &q, w.now)
		return storeKeys(out)
	}
	if got := search(StoreQuery{Prefix: []string{"foo"}}); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("under foo: %v, want [b a] (latest first, not foobar)", got)
	}
	if got := search(StoreQuery{}); !slices.Equal(got, []string{"c", "b", "a"}) {
		t.Errorf("everything: %v", got)
	}
	filter := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for f, want := range map[string][]string{
		`{"c":"red"}`:                        {"b", "a"},
		`{"n":{"$gt":1}}`:                    {"c", "b"},
		`{"n":{"$gte":1,"$lt":3}}`:           {"b", "a"},
		`{"n":{"$lte":1}}`:                   {"a"},
		`{"c":{"$ne":"red"}}`:                {"c"},
		`{"c":{"$eq":"blue"},"n":3}`:         {"c"},
		`{"o":{"x":1}}`:                      {"b"},
		`{"missing":{"$gt":0}}`:              nil,
		`{"c":{"$gt":"blue"},"n":{"$lt":2}}`: {"a"},
	} {
		if got := search(StoreQuery{Filter: filter(f)}); !slices.Equal(got, want) {
			t.Errorf("filter %s: %v, want %v", f, got, want)
		}
	}
	if got := search(StoreQuery{Offset: 1, Limit: 1}); !slices.Equal(got, []string{"b"}) {
		t.Errorf("offset 1 limit 1: %v", got)
	}
	q := StoreQuery{Vector: []float32{1, 0}, Limit: 10, MaxScan: 100}
	out, _, _, _ := w.f.SearchStore("acme", &q, w.now)
	if !slices.Equal(storeKeys(out), []string{"a", "b", "c"}) || *out[0].Score != 1 || out[2].Score != nil {
		t.Fatalf("nearest to (1,0): %v", storeKeys(out))
	}
	if s := *out[1].Score; s < 0.707 || s > 0.708 { // b's best vector is (1,1)
		t.Errorf("b's score %v, want cos 45°", s)
	}
	q = StoreQuery{Limit: 10, MaxScan: 2}
	if _, _, truncated, _ := w.f.SearchStore("acme", &q, w.now); !truncated {
		t.Errorf("a search past its scan bound is not truncated")
	}
	// A vector of another dimension (another embedding model) is not scored.
	put([]string{"other"}, "d", `{}`, []float32{1, 0, 0})
	q = StoreQuery{Prefix: []string{"other"}, Vector: []float32{1, 0}, Limit: 10, MaxScan: 100}
	if out, _, _, _ := w.f.SearchStore("acme", &q, w.now); len(out) != 1 || out[0].Score != nil {
		t.Errorf("a 3-dimension item against a 2-dimension query: %+v, want it unscored", out)
	}
}

// TestStoreNamespaces: LangGraph's list_namespaces conditions.
func TestStoreNamespaces(t *testing.T) {
	w := newWorld(t)
	for _, ns := range [][]string{{"a", "b", "c"}, {"a", "b", "d", "e"}, {"a", "b", "d", "i"}, {"a", "b", "f"},
		{"a", "c", "f"}, {"b", "a", "f"}, {"users", "123"}} {
		w.ok(KindStoreWrite, "acme", &StoreWriteArgs{Ops: []StoreWriteOp{storePut(ns, "k", `{}`)}})
	}
	list := func(conds []NSMatch, depth, limit, offset int) [][]string {
		out, _, _ := w.f.ListStoreNamespaces("acme", conds, depth, limit, offset, 100, nil)
		return out
	}
	eq := func(got, want [][]string) bool {
		return slices.EqualFunc(got, want, func(a, b []string) bool { return slices.Equal(a, b) })
	}
	if got := list([]NSMatch{{Path: []string{"a", "b"}}}, 3, 10, 0); !eq(got, [][]string{{"a", "b", "c"}, {"a", "b", "d"}, {"a", "b", "f"}}) {
		t.Errorf("prefix a,b depth 3: %q", got)
	}
	if got := list([]NSMatch{{Path: []string{"a", "*", "f"}}}, 0, 10, 0); !eq(got, [][]string{{"a", "b", "f"}, {"a", "c", "f"}}) {
		t.Errorf("prefix a,*,f: %q", got)
	}
	if got := list([]NSMatch{{Suffix: true, Path: []string{"*", "f"}}, {Path: []string{"b"}}}, 0, 10, 0); !eq(got, [][]string{{"b", "a", "f"}}) {
		t.Errorf("b... ending *,f: %q", got)
	}
	if got := list([]NSMatch{{Path: []string{"a", "b"}}}, 0, 2, 2); !eq(got, [][]string{{"a", "b", "d", "i"}, {"a", "b", "f"}}) {
		t.Errorf("offset 2: %q", got)
	}
}

// TestStoreTTL: a touch moves only the expiry of live items; purge removes
// the expired ones with their namespace; the kinds need EntryVersion6 and
// a state with items snapshotFormat5.
func TestStoreTTL(t *testing.T) {
	w := newWorld(t)
	ns := []string{"t"}
	w.ok(KindStoreWrite, "acme", &StoreWriteArgs{Ops: []StoreWriteOp{{NS: ns, Key: "k", Value: []byte(`{}`), TTLMs: 100},
		{NS: ns, Key: "short", Value: []byte(`{}`), TTLMs: 15}}})
	before, _, _ := w.f.GetStoreItems("acme", []StoreRef{{ns, "k"}}, w.now)
	w.now += 50
	w.ok(KindStoreTouch, "acme", &StoreTouchArgs{Items: []StoreRef{{ns, "k"}, {ns, "short"}}})
	after, _, _ := w.f.GetStoreItems("acme", []StoreRef{{ns, "k"}, {ns, "short"}}, w.now)
	if after[0] == nil || *after[0].ExpiresAt <= *before[0].ExpiresAt || after[0].UpdatedAt != before[0].UpdatedAt {
		t.Fatalf("touched item: %+v, before %+v", after[0], before[0])
	}
	if after[1] != nil {
		t.Errorf("an expired item was revived by a touch")
	}
	if next := w.f.NextStoreExpiry(); next == 0 || next > w.now {
		t.Fatalf("next expiry %d, want one passed by %d", next, w.now)
	}
	w.ok(KindStorePurge, "", &StorePurgeArgs{Max: 10})
	if ns, _, _ := w.f.ListStoreNamespaces("acme", nil, 0, 10, 0, 100, nil); len(ns) != 1 {
		t.Errorf("namespaces: %q", ns)
	}
	w.now += 200
	w.ok(KindStorePurge, "", &StorePurgeArgs{Max: 10})
	if ns, _, _ := w.f.ListStoreNamespaces("acme", nil, 0, 10, 0, 100, nil); len(ns) != 0 || w.f.NextStoreExpiry() != 0 {
		t.Errorf("after expiry: namespaces %q, next expiry %d", ns, w.f.NextStoreExpiry())
	}
	if v := EncodeEntry([]*Command{NewCommand(KindStoreWrite, 1, "acme", "", &StoreWriteArgs{})})[0]; v != EntryVersion6 {
		t.Errorf("a store.write entry is version %d, want 6", v)
	}
	if f := snapshotFormatOf(w.f.st); f != snapshotFormat5 {
		t.Errorf("snapshot format %d, want %d", f, snapshotFormat5)
	}
}

// BenchmarkStoreSearch: one k-nearest search over 10,000 items (the
// default --store-scan-max) of one 768-dimension vector each, with a
// filter, under the read lock.
func BenchmarkStoreSearch(b *testing.B) {
	w := newWorld(b)
	const n, dims = 10_000, 768
	vec := func(seed int) []float32 {
		v := make([]float32, dims)
		for i := range v {
			v[i] = float32((seed*31+i*17)%97) / 97
		}
		return v
	}
	for i := 0; i < n; i += MaxStoreOps {
		var ops []StoreWriteOp
		for j := i; j < min(n, i+MaxStoreOps); j++ {
			ops = append(ops, StoreWriteOp{NS: []string{"users", "u" + string(rune('a'+j%20))}, Key: string(rune(j)),
				Value: []byte(`{"text":"a memory","n":` + string(rune('0'+j%10)) + `}`), Vectors: [][]float32{vec(j)}})
		}
		w.ok(KindStoreWrite, "acme", &StoreWriteArgs{Ops: ops})
	}
	filter := map[string]any{"n": map[string]any{"$gte": float64(0)}}
	b.ResetTimer()
	for b.Loop() {
		q := StoreQuery{Prefix: []string{"users"}, Filter: filter, Vector: vec(7), Limit: 10, MaxScan: n}
		if out, _, truncated, _ := w.f.SearchStore("acme", &q, w.now); len(out) != 10 || truncated {
			b.Fatalf("%d items, truncated %v", len(out), truncated)
		}
	}
}
