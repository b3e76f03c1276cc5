package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestStoreRoutes: the knowledge store over HTTP: writes, a batch get
// with a TTL refresh, search with filters and vectors, namespace listing,
// the leader's purge of expired items, validation, and grants scoped to
// namespaces ("@store/<labels>/").
func TestStoreRoutes(t *testing.T) {
	fx := newAPIFixture(t)
	c, admin := fx.c, adminAuth()
	post := func(auth map[string]string, route, body string) (int, map[string]any) {
		t.Helper()
		status, _, resp := c.do(t, 0, "POST", "/v1/tenants/acme/store/"+route, body, auth)
		var m map[string]any
		_ = json.Unmarshal(resp, &m)
		return status, m
	}
	if s, m := post(admin, "write", `{"ops":[
		{"namespace":["users","a/b"],"key":"k1","value":{"color":"red","n":1},"vectors":[[1,0]]},
		{"namespace":["users","a/b","deep"],"key":"k2","value":{"color":"blue","n":2},"vectors":[[0,1]]},
		{"namespace":["usersX"],"key":"k3","value":{"color":"red","n":3}},
		{"namespace":["tmp"],"key":"t","value":{},"ttl_minutes":0.001}]}`); s != 200 || m["written"] != 4.0 {
		t.Fatalf("write: %d %v", s, m)
	}
	s, m := post(admin, "get", `{"items":[{"namespace":["users","a/b"],"key":"k1"},{"namespace":["users"],"key":"k1"}],"refresh_ttl":true}`)
	items, _ := m["items"].([]any)
	if s != 200 || len(items) != 2 || items[1] != nil || items[0].(map[string]any)["created_at"] == nil {
		t.Fatalf("get: %d %v", s, m)
	}
	keys := func(m map[string]any) []string {
		var out []string
		for _, it := range m["items"].([]any) {
			out = append(out, it.(map[string]any)["key"].(string))
		}
		return out
	}
	if s, m := post(admin, "search", `{"namespace_prefix":["users"]}`); s != 200 || !slices.Equal(keys(m), []string{"k1", "k2"}) {
		t.Errorf("search under users: %d %v, want k1 k2 (not usersX, latest first within one write: key order)", s, m)
	}
	if s, m := post(admin, "search", `{"namespace_prefix":[],"filter":{"color":"red","n":{"$gt":1}}}`); s != 200 || !slices.Equal(keys(m), []string{"k3"}) {
		t.Errorf("filtered search: %d %v", s, m)
	}
	s, m = post(admin, "search", `{"namespace_prefix":["users"],"vector":[0,1]}`)
	if s != 200 || !slices.Equal(keys(m), []string{"k2", "k1"}) || m["items"].([]any)[0].(map[string]any)["score"] != 1.0 {
		t.Errorf("vector search: %d %v", s, m)
	}
	s, m = post(admin, "namespaces", `{"match_conditions":[{"match_type":"prefix","path":["users","*"]}],"max_depth":2}`)
	if ns, _ := json.Marshal(m["namespaces"]); s != 200 || string(ns) != `[["users","a/b"]]` {
		t.Errorf("namespaces: %d %v", s, m)
	}
	// The leader purges the expired item; its namespace goes with it.
	waitFor(t, "the expired item purged", func() string {
		_, m := post(admin, "namespaces", `{"match_conditions":[{"match_type":"prefix","path":["tmp"]}]}`)
		if ns := m["namespaces"].([]any); len(ns) != 0 {
			return "namespaces under tmp: " + string(mustMarshal(ns))
		}
		return ""
	})

	for _, bad := range []string{
		`{"ops":[]}`,
		`{"ops":[{"namespace":[],"key":"k","value":{}}]}`,
		`{"ops":[{"namespace":["a.b"],"key":"k","value":{}}]}`,
		`{"ops":[{"namespace":["a",""],"key":"k","value":{}}]}`,
		`{"ops":[{"namespace":["a"],"key":"","value":{}}]}`,
		`{"ops":[{"namespace":["a"],"key":"k","value":[1]}]}`,
		`{"ops":[{"namespace":["a"],"key":"k","value":{},"vectors":[[1],[1,2]]}]}`,
		`{"ops":[{"namespace":["a"],"key":"k","value":{},"ttl_minutes":0}]}`,
	} {
		if s, m := post(admin, "write", bad); s != http.StatusBadRequest {
			t.Errorf("write %s: %d %v, want 400", bad, s, m)
		}
	}
	if s, m := post(admin, "search", `{"namespace_prefix":[],"filter":{"n":{"$regex":"x"}}}`); s != http.StatusBadRequest {
		t.Errorf("unknown operator: %d %v, want 400", s, m)
	}

	// A principal with grants under users/a%2Fb/ only.
	tok := fx.createPrincipal(t, admin, "acme",
		`{"name":"memory","grants":[{"resource":"kv","prefix":"@store/users/a%2Fb/","actions":["read","write"]}]}`)
	bot := bearer(tok)
	if s, _ := post(bot, "write", `{"ops":[{"namespace":["users","a/b"],"key":"k9","value":{}}]}`); s != 200 {
		t.Errorf("write in the granted namespace: %d", s)
	}
	if s, _ := post(bot, "write", `{"ops":[{"namespace":["usersX"],"key":"k9","value":{}}]}`); s != http.StatusForbidden {
		t.Errorf("write outside the grant: %d, want 403", s)
	}
	if s, _ := post(bot, "get", `{"items":[{"namespace":["usersX"],"key":"k3"}]}`); s != http.StatusForbidden {
		t.Errorf("get outside the grant: %d, want 403", s)
	}
	if s, m := post(bot, "search", `{"namespace_prefix":["users","a/b"]}`); s != 200 || len(m["items"].([]any)) != 3 {
		t.Errorf("search in the grant: %d %v", s, m)
	}
	if s, _ := post(bot, "search", `{"namespace_prefix":["usersX"]}`); s != http.StatusForbidden {
		t.Errorf("search outside the grant: %d, want 403", s)
	}
	if s, m := post(bearer(fx.reader), "namespaces", `{}`); s != 200 || len(m["namespaces"].([]any)) != 3 {
		t.Errorf("a kv reader lists: %d %v", s, m)
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestStoreFilterBounded: a search evaluates every filter term for every
// item it examines (up to --store-scan-max, under the state's read lock),
// so a filter is bounded in terms, nested ones counted, and in bytes;
// before, a 1 MiB body could carry some 55,000 terms (about 10^9
// comparisons, each encoding JSON, with writes waiting on the lock).
func TestStoreFilterBounded(t *testing.T) {
	filter := func(members int, value string) map[string]json.RawMessage {
		in := map[string]json.RawMessage{}
		for i := range members {
			in[fmt.Sprintf("f%d", i)] = json.RawMessage(value)
		}
		return in
	}
	nested := func(depth int) string {
		v := "1"
		for range depth {
			v = `{"a":` + v + `}`
		}
		return v
	}
	for _, tc := range []struct {
		name string
		in   map[string]json.RawMessage
		ok   bool
	}{
		{"64 members", filter(64, "1"), true},
		{"65 members", filter(65, "1"), false},
		{"32 members of one operator each", filter(32, `{"$ne":0}`), true},
		{"33 members of one operator each", filter(33, `{"$ne":0}`), false},
		{"one member nested 63 deep", filter(1, nested(63)), true},
		{"one member nested 64 deep", filter(1, nested(64)), false},
		{"a 16,000-byte value", filter(1, `"`+strings.Repeat("x", 16_000)+`"`), true},
		{"a 17,000-byte value", filter(1, `"`+strings.Repeat("x", 17_000)+`"`), false},
	} {
		_, err := storeFilter(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want accepted %v", tc.name, err, tc.ok)
		}
	}
}
