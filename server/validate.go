package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// validName checks a name against API.md's grammar.
func validName(what, s string) error {
	if !nameRE.MatchString(s) {
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
		if !pathSegRE.MatchString(seg) {
			return badRequest("%s %q: segment %q must match [A-Za-z0-9._:-]+", what, s, seg)
		}
	}
	return nil
}

var pathSegRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// readBody reads at most limit bytes of the request body.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, errorf(codeTooLarge, "request body is over the %d byte limit", limit)
	}
	if err != nil {
		return nil, badRequest("reading body: %v", err)
	}
	return b, nil
}

// decodeStrict decodes one JSON object into v, refusing unknown fields and
// trailing data.
func decodeStrict(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return badRequest("request body is empty; want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("malformed JSON: %v", err)
	}
	if dec.More() {
		return badRequest("malformed JSON: data after the object")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return badRequest("malformed JSON: data after the object")
	}
	return nil
}
