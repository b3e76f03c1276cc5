package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/fsm/wire"
)

// The grammar of docs/api.md, as the regular expressions it is written in.
var (
	nameGrammar = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	segGrammar  = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
)

// validName and validPath's segment check accept exactly the grammar.
func TestNameGrammar(t *testing.T) {
	const alphabet = "aZ09._:-/ é\x00\x7f"
	r := rand.New(rand.NewPCG(1, 2))
	cases := []string{"", "a", "-a", ".a", "a.b", "a..b", strings.Repeat("a", 128), strings.Repeat("a", 129), "a b", "é"}
	for range 20000 {
		n := r.IntN(8)
		if r.IntN(50) == 0 {
			n = 126 + r.IntN(4)
		}
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, s := range cases {
		if got, want := validName("name", s) == nil, nameGrammar.MatchString(s); got != want {
			t.Errorf("validName(%q) accepts: %v, grammar: %v", s, got, want)
		}
		if !strings.Contains(s, "/") && s != "." && s != ".." {
			if got, want := validPath("key", s) == nil, segGrammar.MatchString(s); got != want {
				t.Errorf("validPath(%q) accepts: %v, grammar: %v", s, got, want)
			}
		}
	}
}

func TestDecodeStrict(t *testing.T) {
	type obj struct {
		A int `json:"a"`
	}
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"a":1}`, true},
		{" \t\r\n{\"a\":1} \t\r\n", true},
		{`{"a":1}x`, false},
		{`{"a":1} {}`, false},
		{`{"a":1}}`, false},
		{`{"a":1}]`, false},
		{"{\"a\":1}\f", false}, // not JSON whitespace
		{`{"a":1,"b":2}`, false},
		{`{"a":"1"}`, false},
		{`{"a":`, false},
		{``, false},
		{`  `, false},
	} {
		var v obj
		err := decodeStrict([]byte(c.body), &v)
		if (err == nil) != c.ok {
			t.Errorf("decodeStrict(%q) = %v, want ok %v", c.body, err, c.ok)
		}
		if c.ok && v.A != 1 {
			t.Errorf("decodeStrict(%q) decoded %+v", c.body, v)
		}
	}
}

// readBody takes a body of known length in one read and one of unknown
// length (chunked) through the limit, and refuses either over the limit.
func TestReadBody(t *testing.T) {
	read := func(body string, length int64, limit int64) ([]byte, error) {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.ContentLength = length
		return readBody(httptest.NewRecorder(), r, limit, time.Minute)
	}
	for _, known := range []bool{true, false} {
		length := func(n int64) int64 {
			if known {
				return n
			}
			return -1
		}
		if b, err := read("hello", length(5), 5); err != nil || string(b) != "hello" {
			t.Errorf("known length %v, limit 5: %q, %v", known, b, err)
		}
		var he *apiError
		if _, err := read("hello!", length(6), 5); !errors.As(err, &he) || he.Code != codeTooLarge {
			t.Errorf("known length %v, over the limit: %v, want %s", known, err, codeTooLarge)
		}
	}
	if b, err := read("", 0, 5); err != nil || len(b) != 0 {
		t.Errorf("empty body: %q, %v", b, err)
	}
	if _, err := read("hel", 5, 10); err == nil {
		t.Error("a body shorter than its Content-Length was accepted")
	}
}

// Strict JSON: exact-case member names, no duplicate members, valid UTF-8
// and no lone surrogate escapes, at every depth.
func TestDecodeStrictRefusesAmbiguousJSON(t *testing.T) {
	type inner struct {
		B string `json:"b"`
	}
	type obj struct {
		A  int             `json:"a"`
		In *inner          `json:"in"`
		L  []inner         `json:"l"`
		M  map[string]int  `json:"m"`
		R  json.RawMessage `json:"r"`
	}
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"a":1}`, true},
		{`{"A":1}`, false},
		{`{"a":1,"a":1}`, false},
		{`{"a":1,"in":{"B":"x"}}`, false},
		{`{"a":1,"in":{"b":"x","b":"y"}}`, false},
		{`{"a":1,"l":[{"b":"x"},{"B":"y"}]}`, false},
		{`{"a":1,"m":{"k":1,"K":2}}`, true}, // a map's keys are data
		{`{"a":1,"m":{"k":1,"k":2}}`, false},
		{`{"a":1,"r":{"x":{"y":1,"y":2}}}`, false},
		{`{"a":1,"r":[{"x":1},{"x":1}]}`, true},
		{"{\"a\":1,\"r\":\"\xff\"}", false},
		{"{\"a\":1,\"in\":{\"b\":\"caf\xc3\"}}", false},
		{`{"a":1,"r":"\ud800"}`, false},
		{`{"a":1,"r":"\udc00"}`, false},
		{`{"a":1,"r":"\ud800\u0041"}`, false},
		{`{"a":1,"r":"x\ud800"}`, false},
		{`{"a":1,"r":{"\ud800":1}}`, false},
		{`{"a":1,"r":"\ud83d\ude00"}`, true},
		{`{"a":1,"r":"\\ud800"}`, true}, // a backslash, then text
		{`{"a":1,"r":"\u00e9"}`, true},
		{`{"a":1,"m":` + manyMembers(40, "") + `}`, true},
		{`{"a":1,"m":` + manyMembers(40, "k7") + `}`, false}, // a duplicate in a large object
		{`{"a":1,"m":` + manyMembers(40, "k39") + `}`, false},
		{`{"a":1,"m":` + manyMembers(5, "k0") + `}`, false},
	} {
		var v obj
		err := decodeStrict([]byte(c.body), &v)
		if (err == nil) != c.ok {
			t.Errorf("decodeStrict(%q) = %v, want ok %v", c.body, err, c.ok)
		}
		var ae *apiError
		if err != nil && (!errors.As(err, &ae) || ae.Code != "invalid_argument") {
			t.Errorf("decodeStrict(%q) = %v, want invalid_argument", c.body, err)
		}
	}
}

// manyMembers is an object of n members k0..k(n-1), then dup again when
// it is not empty.
func manyMembers(n int, dup string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	if dup != "" {
		fmt.Fprintf(&b, `%q:0,`, dup)
	}
	return strings.TrimSuffix(b.String(), ",") + "}"
}

// Base64 members read as encoding/json reads them: MIME line breaks
// skipped, an array of byte values taken (review of the go-json-experiment
// change: both were refused).
func TestDecodeStrictBase64AsBefore(t *testing.T) {
	type blob struct {
		B []byte `json:"b64"`
	}
	for body, want := range map[string]string{
		`{"b64":"QUJD\nREVG"}`:   "ABCDEF",
		`{"b64":"QUJD\r\nREVG"}`: "ABCDEF",
		`{"b64":"AA\n=="}`:       "\x00",
		`{"b64":[65,66]}`:        "AB",
		`{"b64":"QUJDREVG"}`:     "ABCDEF",
	} {
		var v blob
		if err := decodeStrict([]byte(body), &v); err != nil || string(v.B) != want {
			t.Errorf("decodeStrict(%s) = %q, %v; want %q", body, v.B, err, want)
		}
	}
	var v blob
	var ae *apiError
	if err := decodeStrict([]byte(`{"b64":"QUJ*"}`), &v); !errors.As(err, &ae) || ae.Code != "invalid_argument" {
		t.Errorf("a character outside base64: got %v, want invalid_argument", err)
	}
}

// A refusal says where the member is, as a JSON Pointer (RFC 6901) to the
// object holding it.
func TestDecodeStrictSaysWhere(t *testing.T) {
	type inner struct {
		B string          `json:"b"`
		R json.RawMessage `json:"r"`
	}
	type obj struct {
		In *inner  `json:"in"`
		L  []inner `json:"l"`
	}
	for body, want := range map[string]string{
		`{"In":{}}`:                                  `unknown field "In" (names`,
		`{"in":{"b":"x","B":"y"}}`:                   `unknown field "B" in /in (names`,
		`{"l":[{"b":"x"},{"b":"x","b":"y"}]}`:        `duplicate member "b" in /l/1`,
		`{"l":[{},{"r":[0,{"z":[{"q":1,"q":2}]}]}]}`: `duplicate member "q" in /l/1/r/1/z/0`,
		`{"in":{"r":{"":{"a":1,"a":2}}}}`:            `duplicate member "a" in /in/r/`,
	} {
		var v obj
		err := decodeStrict([]byte(body), &v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decodeStrict(%s) = %v, want %q in it", body, err, want)
		}
	}
}

// Over HTTP, each kind of ambiguous body is 400 invalid_argument.
func TestStrictJSONOverHTTP(t *testing.T) {
	fx := newAPIFixture(t)
	if status, _, body := fx.c.do(t, 0, "POST", "/v1/tenants/acme/tasks", `{"task_id":"t1","queue":"q"}`, adminAuth()); status != 201 {
		t.Fatalf("task create: %d %s", status, body)
	}
	cases := []struct{ name, method, path, body string }{
		{"kv: case-folded name", "PUT", "/v1/tenants/acme/kv/ns/k", `{"Value":3}`},
		{"kv: duplicate member", "PUT", "/v1/tenants/acme/kv/ns/k", `{"value":3,"value":4}`},
		{"kv: duplicate nested member", "PUT", "/v1/tenants/acme/kv/ns/k", `{"value":{"a":1,"a":2}}`},
		{"kv: invalid UTF-8", "PUT", "/v1/tenants/acme/kv/ns/k", "{\"value\":\"\xff\xfe\"}"},
		{"kv: lone high surrogate", "PUT", "/v1/tenants/acme/kv/ns/k", `{"value":"\ud800"}`},
		{"kv: lone low surrogate", "PUT", "/v1/tenants/acme/kv/ns/k", `{"value":"\udfff"}`},
		{"update: case-folded name", "POST", "/v1/tenants/acme/tasks/t1/update", `{"status":"done","Status":"x"}`},
		{"update: duplicate in result", "POST", "/v1/tenants/acme/tasks/t1/update", `{"result":{"a":1,"a":2}}`},
		{"update: lone surrogate in payload", "POST", "/v1/tenants/acme/tasks/t1/update", `{"payload":["\ud800"]}`},
		{"claim: duplicate", "POST", "/v1/tenants/acme/queues/q/claim", `{"owner":"a","lease_ms":1000,"owner":"b"}`},
		{"principal: case-folded nested name", "POST", "/v1/tenants/acme/principals", `{"name":"p","grants":[{"Resource":"kv","prefix":"","actions":["read"]}]}`},
	}
	for _, tc := range cases {
		status, _, body := fx.c.do(t, 0, tc.method, tc.path, tc.body, adminAuth())
		if status != 400 || errorCode(body) != "invalid_argument" {
			t.Errorf("%s: got %d %s, want 400 invalid_argument", tc.name, status, body)
		}
	}
	if status, _, body := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/kv/ns/k", `{"value":"\ud83d\ude00 caf\u00e9"}`, adminAuth()); status != 200 {
		t.Errorf("a valid surrogate pair: got %d %s, want 200", status, body)
	}
}

// BenchmarkDecodeStrictTaskUpdate is the body every fenced update sends.
func BenchmarkDecodeStrictTaskUpdate(b *testing.B) {
	body := []byte(`{"fencing_token":123456,"expect_version":17,"status":"done","result":{"ok":true,"n":42,"text":"a short result"}}`)
	for b.Loop() {
		var v wire.TaskUpdate
		if err := decodeStrict(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}
