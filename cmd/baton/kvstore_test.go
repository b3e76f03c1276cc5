package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestKVStoreCommands: baton kv search and kv namespaces send the store's
// requests (labels as a namespace prefix, --filter as an object, repeated
// --prefix and --suffix labels) and print the answers.
func TestKVStoreCommands(t *testing.T) {
	t.Setenv("BATON_TOKEN", "tok")
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+string(body))
		w.Header().Set("X-Baton-Index", "9")
		if strings.HasSuffix(r.URL.Path, "/search") {
			io.WriteString(w, `{"items": [{"namespace": ["users", "a/b"], "key": "m1", "value": {"text": "tea"},
				"created_at": "2026-01-02T03:04:05.678Z", "updated_at": "2026-01-02T03:04:05.678Z"}], "truncated": false}`)
			return
		}
		io.WriteString(w, `{"namespaces": [["users", "a/b"], ["users", "bob"]], "truncated": true}`)
	}))
	defer srv.Close()
	cases := []struct {
		args      []string
		req, want string
	}{
		{[]string{"kv", "search", "users", "a/b", "--filter", `{"year": {"$gte": 2026}}`, "--limit", "5"},
			`POST /v1/tenants/acme/store/search {"namespace_prefix":["users","a/b"],"filter":{"year":{"$gte":2026}},"limit":5}`,
			`["users","a/b"]  m1`},
		{[]string{"kv", "search"}, `POST /v1/tenants/acme/store/search {"namespace_prefix":[]}`, `{"text":"tea"}`},
		{[]string{"kv", "namespaces", "--prefix", "users", "--prefix", "*", "--suffix", "bob", "--max-depth", "2"},
			`POST /v1/tenants/acme/store/namespaces {"match_conditions":[{"match_type":"prefix","path":["users","*"]},{"match_type":"suffix","path":["bob"]}],"max_depth":2}`,
			"[\"users\",\"bob\"]\n\n(truncated"},
	}
	for _, tc := range cases {
		got = nil
		var out, errOut bytes.Buffer
		args := append([]string{"--endpoints", srv.URL, "--timeout", "5s", "--tenant", "acme"}, tc.args...)
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut.String())
		}
		if len(got) != 1 || got[0] != tc.req {
			t.Errorf("%v sent %q, want %q", tc.args, got, tc.req)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v printed %q, want it to contain %q", tc.args, out.String(), tc.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--endpoints", srv.URL, "--tenant", "acme", "kv", "search", "--filter", "[1]"}, &out, &errOut); code == 0 {
		t.Errorf("a --filter that is not an object was accepted")
	}
}
