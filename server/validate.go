package server

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// validName checks a name against the grammar of docs/api.md:
// [A-Za-z0-9][A-Za-z0-9._:-]{0,127}.
func validName(what, s string) error {
	if len(s) == 0 || len(s) > 128 || !alnum(s[0]) || !nameChars(s) {
		return badRequest("%s %q must match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}", what, s)
	}
	return nil
}

// validPath checks a KV key or ref name: names joined by "/", no empty, "."
// or ".." segment.
func validPath(what, s string) error {
	if s == "" || len(s) > 1024 {
		return badRequest("%s must be 1 to 1024 characters", what)
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return badRequest("%s %q has an empty, \".\" or \"..\" segment", what, s)
		}
		if len(seg) > 128 || !nameChars(seg) { // [A-Za-z0-9._:-]{1,128}
			return badRequest("%s %q: segment %q must match [A-Za-z0-9._:-]+", what, s, seg)
		}
	}
	return nil
}

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// nameChars reports whether every byte of s is one of [A-Za-z0-9._:-].
func nameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

// defaultBodyTimeout is Config.BodyTimeout's default, batond's
// --http-body-timeout default.
const defaultBodyTimeout = time.Minute

// readBody reads at most limit bytes of the request body, within timeout
// (Config.BodyTimeout): a client that declares a body and sends it slowly
// holds a connection and a goroutine, never longer. A declared length over
// the limit is refused before anything is read.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errorf(codeTooLarge, "request body is over the %d byte limit", limit)
	}
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return []byte{}, nil
	}
	// The deadline is lifted again once the whole body is read: the
	// connection's read side then watches for the client going away, and a
	// deadline passing there would cancel the request. After a failed read
	// it stays, so that the server's attempt to drain what is left of the
	// body before answering fails fast too, and the connection is closed.
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	if n := r.ContentLength; n >= 0 {
		// The length is known (the server's body reader holds the client to
		// it): one buffer of that size, no growing.
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, badRequest("reading body: %v", err)
		}
		if deadline {
			_ = rc.SetReadDeadline(time.Time{})
		}
		return b, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, errorf(codeTooLarge, "request body is over the %d byte limit", limit)
	}
	if err != nil {
		return nil, badRequest("reading body: %v", err)
	}
	if deadline {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return b, nil
}
