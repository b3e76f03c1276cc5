package client_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
)

// shapeCase pins method, path, query and body of one typed call, as the
// package's node receives it (through the recording proxy); the node's
// answer, often an error for the made-up names, is not the subject.
type shapeCase struct {
	name                    string
	call                    func(c *client.Client) error
	method, path, query, in string
}

func runShapes(t *testing.T, cases []shapeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := proxy(t, nil)
			c := newClient(t, p.URL)
			var e *client.Error
			if err := tc.call(c); err != nil && !errors.As(err, &e) {
				t.Fatal(err)
			}
			r := p.Requests()[0]
			if r.Method != tc.method || r.Path != tc.path || r.Query != tc.query {
				t.Errorf("got %s %s?%s, want %s %s?%s", r.Method, r.Path, r.Query, tc.method, tc.path, tc.query)
			}
			if string(r.Body) != tc.in {
				t.Errorf("got body %s\nwant      %s", r.Body, tc.in)
			}
		})
	}
}

func TestKVRequestShapes(t *testing.T) {
	u64 := func(v uint64) *uint64 { return &v }
	runShapes(t, []shapeCase{
		{"PutKV", func(c *client.Client) error {
			_, err := c.PutKV(bg, "acme", "research", "sources/raft paper", client.PutKVRequest{Value: json.RawMessage(`{"a":1}`),
				ExpectVersion: u64(0), TTL: 30 * time.Second, Fence: &client.Fence{TaskID: "t1", Token: 589825}})
			return err
		}, "PUT", "/v1/tenants/acme/kv/research/sources/raft%20paper", "",
			`{"value":{"a":1},"expect_version":0,"ttl_ms":30000,"fence":{"task_id":"t1","token":589825}}`},
		{"GetKV stale", func(c *client.Client) error { _, err := c.GetKV(bg, "acme", "ns", "a/b/c", client.Stale()); return err },
			"GET", "/v1/tenants/acme/kv/ns/a/b/c", "consistency=stale", ``},
		{"DeleteKV", func(c *client.Client) error { return c.DeleteKV(bg, "acme", "ns", "k", u64(589825)) },
			"DELETE", "/v1/tenants/acme/kv/ns/k", "expect_version=589825", ``},
		{"DeleteKV unguarded", func(c *client.Client) error { return c.DeleteKV(bg, "acme", "ns", "k", nil) },
			"DELETE", "/v1/tenants/acme/kv/ns/k", "", ``},
		{"ListKV", func(c *client.Client) error {
			_, err := c.ListKV(bg, "acme", "ns", client.ListKVOptions{Prefix: "a/", Limit: 5, PageToken: "p"})
			return err
		}, "GET", "/v1/tenants/acme/kv/ns", "limit=5&page_token=p&prefix=a%2F", ``},
	})
}

func TestKVKeyChecked(t *testing.T) {
	p := proxy(t, nil)
	c := newClient(t, p.URL)
	for _, key := range []string{"", "a//b", "/a", "a/", "a/./b", "..", "a/../b"} {
		_, err := c.GetKV(bg, "acme", "ns", key)
		if !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("GetKV(key %q): got %v, want ErrInvalidArgument", key, err)
		}
	}
	if _, err := c.ListKV(bg, "acme", "", client.ListKVOptions{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("ListKV without namespace: got %v, want ErrInvalidArgument", err)
	}
	if n := p.Count(); n != 0 {
		t.Errorf("got %d requests, want 0", n)
	}
}

// TestKVEntryDecodes: entries as the node lists them, a page at a time:
// key, version, value, no expiry or one a TTL after the write.
func TestKVEntryDecodes(t *testing.T) {
	c := newClient(t, env.URL())
	ns := uniqueName("ns")
	if _, err := c.PutKV(bg, "acme", ns, "a/1", client.PutKVRequest{Value: json.RawMessage(`{"x": 1}`)}); err != nil {
		t.Fatal(err)
	}
	put2, err := c.PutKV(bg, "acme", ns, "a/2", client.PutKVRequest{Value: json.RawMessage(`"v"`), TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ListKV(bg, "acme", ns, client.ListKVOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Entries) != 1 || list.NextPageToken == "" {
		t.Fatalf("got %+v, want 1 entry and a page token", list)
	}
	e0 := list.Entries[0]
	if e0.Namespace != ns || e0.Key != "a/1" || e0.Version == 0 || e0.ExpiresAt != nil || e0.UpdatedAt.IsZero() || !jsonEqual(e0.Value, `{"x":1}`) {
		t.Errorf("got entry %+v", e0)
	}
	list, err = c.ListKV(bg, "acme", ns, client.ListKVOptions{Limit: 1, PageToken: list.NextPageToken})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Entries) != 1 {
		t.Fatalf("got %+v, want the second entry", list)
	}
	e1 := list.Entries[0]
	if e1.Key != "a/2" || e1.Version != put2.Version || !jsonEqual(e1.Value, `"v"`) {
		t.Errorf("got entry %+v", e1)
	}
	if want := e1.UpdatedAt.Add(30 * time.Second); e1.ExpiresAt == nil || !e1.ExpiresAt.Equal(want) {
		t.Errorf("got expires_at %v, want %v (updated_at + TTL)", e1.ExpiresAt, want)
	}
}

// jsonEqual reports whether raw holds the same JSON value as want.
func jsonEqual(raw json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && reflect.DeepEqual(a, b)
}

func TestStoreRequestShapes(t *testing.T) {
	runShapes(t, []shapeCase{
		{"StoreWrite", func(c *client.Client) error {
			return c.StoreWrite(bg, "acme", []client.StoreOp{
				{Namespace: []string{"shapes", "a/b"}, Key: "k", Value: map[string]int{"n": 1}, Vectors: [][]float32{{1, 0.5}}, TTL: 90 * time.Second},
				{Namespace: []string{"shapes"}, Key: "gone"}})
		}, "POST", "/v1/tenants/acme/store/write", "",
			`{"ops":[{"namespace":["shapes","a/b"],"key":"k","value":{"n":1},"vectors":[[1,0.5]],"ttl_minutes":1.5},{"namespace":["shapes"],"key":"gone"}]}`},
		{"StoreGet", func(c *client.Client) error {
			_, err := c.StoreGet(bg, "acme", []client.StoreRef{{Namespace: []string{"u"}, Key: "k"}}, true, client.Stale())
			return err
		}, "POST", "/v1/tenants/acme/store/get", "consistency=stale", `{"items":[{"namespace":["u"],"key":"k"}],"refresh_ttl":true}`},
		{"StoreSearch", func(c *client.Client) error {
			_, err := c.StoreSearch(bg, "acme", client.StoreSearchRequest{Filter: map[string]any{"n": map[string]int{"$gt": 1}},
				Vector: []float32{1}, Limit: 5, Offset: 2})
			return err
		}, "POST", "/v1/tenants/acme/store/search", "", `{"namespace_prefix":[],"filter":{"n":{"$gt":1}},"vector":[1],"limit":5,"offset":2}`},
		{"ListStoreNamespaces", func(c *client.Client) error {
			_, err := c.ListStoreNamespaces(bg, "acme", client.StoreNamespacesRequest{Prefix: []string{"a", "*"}, Suffix: []string{"z"}, MaxDepth: 3})
			return err
		}, "POST", "/v1/tenants/acme/store/namespaces", "",
			`{"match_conditions":[{"match_type":"prefix","path":["a","*"]},{"match_type":"suffix","path":["z"]}],"max_depth":3}`},
	})
}
