package server

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
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
		return readBody(httptest.NewRecorder(), r, limit)
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
