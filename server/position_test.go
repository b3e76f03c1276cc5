package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
)

// TestPositionHeader: every answer with X-Baton-Index I also carries
// X-Baton-Position, I<<16 | 0xFFFF, in the unit of fencing tokens and KV
// versions (log index << 16 | the command's place in its entry): a token
// or version the answer's state holds is at most that, one issued later is
// above it.
func TestPositionHeader(t *testing.T) {
	c := newCluster(t, 1)
	leader := c.WaitForLeader(t)
	if status, _, body := c.do(t, leader, "PUT", "/v1/tenants/acme", nil, adminAuth()); status != http.StatusCreated {
		t.Fatalf("PUT tenant: got %d %s, want 201", status, body)
	}
	position := func(h http.Header) (index, pos uint64) {
		t.Helper()
		index = indexOf(t, h)
		pos, err := strconv.ParseUint(h.Get("X-Baton-Position"), 10, 64)
		if err != nil {
			t.Fatalf("X-Baton-Position = %q: %v", h.Get("X-Baton-Position"), err)
		}
		if want := index<<16 | 0xFFFF; pos != want {
			t.Errorf("X-Baton-Position: got %d, want %d (X-Baton-Index %d << 16 | 0xFFFF)", pos, want, index)
		}
		return index, pos
	}
	cases := []struct {
		name, method, path, body, field string
	}{
		{"kv put", "PUT", "/v1/tenants/acme/kv/ns/k", `{"value":1}`, "version"},
		{"task create", "POST", "/v1/tenants/acme/tasks", `{"task_id":"t1","queue":"q"}`, ""},
		{"claim", "POST", "/v1/tenants/acme/tasks/t1/claim", `{"owner":"w","lease_ms":60000}`, "fencing_token"},
		{"kv get", "GET", "/v1/tenants/acme/kv/ns/k", "", "version"},
		{"task get", "GET", "/v1/tenants/acme/tasks/t1", "", "fencing_token"},
	}
	var lastPos uint64
	for _, tc := range cases {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		status, h, raw := c.do(t, leader, tc.method, tc.path, body, adminAuth())
		if status >= 300 {
			t.Fatalf("%s: got %d %s", tc.name, status, raw)
		}
		_, pos := position(h)
		if pos < lastPos {
			t.Errorf("%s: position %d went back from %d", tc.name, pos, lastPos)
		}
		lastPos = pos
		if tc.field == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		v := uint64(m[tc.field].(float64))
		if v == 0 || v > pos || (tc.method != "GET" && v <= pos-0x10000) {
			t.Errorf("%s: %s %d, want at most %d (and, for a write, in its own entry)", tc.name, tc.field, v, pos)
		}
	}
}
