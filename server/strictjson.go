package server

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Strict JSON (api-notes.md "General"): encoding/json on its own matches
// member names case-insensitively, keeps the last of duplicate members,
// and turns invalid UTF-8 and lone surrogate escapes into U+FFFD. A
// request body is refused instead when it has any of them, at any depth:
// each is a body that two JSON readers may understand differently.
// go-json-experiment/json (the encoding/json/v2 proposal's module) reads
// that way by default, in one pass; unknown members are refused by option.

// Base64 members ([]byte) read as encoding/json read them, as they did
// before: line breaks in the text are skipped (MIME-wrapped base64, which
// Python's base64.encodebytes writes), and an array of byte values is
// taken too.
var strictOptions = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv1.ParseBytesWithLooseRFC4648(true),
	jsonv1.FormatBytesWithLegacySemantics(true),
)

// decodeStrict decodes one JSON object into v, refusing unknown fields,
// member names that match a field only when case is ignored, duplicate
// members, invalid UTF-8, lone surrogate escapes and trailing data.
func decodeStrict(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return badRequest("request body is empty; want a JSON object")
	}
	if err := jsonv2.Unmarshal(b, v, strictOptions); err != nil {
		return badRequest("malformed JSON: %s", strictMessage(err))
	}
	return nil
}

// checkJSONText reports why b is not one JSON text of valid UTF-8 with no
// lone surrogate escape (nil when it is). Duplicate members are allowed:
// the caller keeps the text as given rather than reading it.
func checkJSONText(b []byte) error {
	var v jsontext.Value
	if err := jsonv2.Unmarshal(b, &v, jsontext.AllowDuplicateNames(true)); err != nil {
		return errors.New(strictMessage(err))
	}
	return nil
}

// strictMessage words a refusal with where it is, as a JSON Pointer
// (RFC 6901) to the object holding the member. An unknown member is an
// `unknown field "x"`, as encoding/json words it: SDKs match those words
// to find a server that predates a field (client/concurrency's
// unknownField).
func strictMessage(err error) string {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) && errors.Is(se.Err, jsonv2.ErrUnknownName) {
		return fmt.Sprintf("unknown field %q%s (names are case-sensitive)",
			se.JSONPointer.LastToken(), where(se.JSONPointer.Parent()))
	}
	var sx *jsontext.SyntacticError
	if errors.As(err, &sx) && errors.Is(sx.Err, jsontext.ErrDuplicateName) {
		return fmt.Sprintf("duplicate member %q%s",
			sx.JSONPointer.LastToken(), where(sx.JSONPointer.Parent()))
	}
	msg := err.Error()
	for _, p := range []string{"jsontext: ", "json: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

func where(p jsontext.Pointer) string {
	if p == "" {
		return ""
	}
	return " in " + string(p)
}
