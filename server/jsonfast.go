package server

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Hand-written decoding of the two busiest request bodies (a queue claim,
// a task update), for the plain form clients send: members with the exact
// lower-case names, each once; strings without escapes; nested values
// (result, payload) held to the same strict rules as decodeStrict; integers as plain
// digits; true or false. Anything else, an error included, returns false
// and the caller decodes with decodeStrict, which also words the error.
// Where the fast path accepts a body, it decodes what decodeStrict would
// (FuzzFastDecoding holds it to that). decodeStrict's reflection was 3% of
// the leader's CPU under the queue workload.

// fastDecoder is a request body with a fast path: decodeFast fills it from
// b and reports whether it could; on false it is unchanged.
type fastDecoder interface {
	decodeFast(b []byte) bool
}

// jsonValue is one member's value: kind 's' (a string; text is its
// contents), 'n' (an integer; text is its digits), 't', 'f' (true, false)
// or 'r' (any other valid JSON value; text is its bytes).
type jsonValue struct {
	kind byte
	text []byte
}

// scanObject calls member for each member of the object that b holds, in
// order, and reports whether b was in the plain form and every call
// returned true.
func scanObject(b []byte, member func(name string, v jsonValue) bool) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	for {
		name, next, ok := plainString(b, i)
		if !ok {
			return false
		}
		i = skipWS(b, next)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		v, next, ok := scanValue(b, i)
		if !ok || !member(string(name), v) {
			return false
		}
		i = skipWS(b, next)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return skipWS(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a string at b[i] that has no escapes and is valid
// UTF-8, and returns its contents and the index after it.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			return s, j + 1, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// scanValue reads the value at b[i].
func scanValue(b []byte, i int) (jsonValue, int, bool) {
	if i >= len(b) {
		return jsonValue{}, 0, false
	}
	switch c := b[i]; {
	case c == '"':
		s, next, ok := plainString(b, i)
		return jsonValue{kind: 's', text: s}, next, ok
	case c >= '0' && c <= '9':
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') || (b[i] == '0' && j-i > 1) {
			return jsonValue{}, 0, false
		}
		return jsonValue{kind: 'n', text: b[i:j]}, j, true
	case c == 't' && hasPrefixAt(b, i, "true"):
		return jsonValue{kind: 't'}, i + 4, true
	case c == 'f' && hasPrefixAt(b, i, "false"):
		return jsonValue{kind: 'f'}, i + 5, true
	case c == '{' || c == '[':
		end, ok := compositeEnd(b, i)
		if !ok || !validStrict(b[i:end]) {
			return jsonValue{}, 0, false
		}
		return jsonValue{kind: 'r', text: b[i:end]}, end, true
	}
	return jsonValue{}, 0, false // null, a negative number, anything else
}

// validStrict reports whether b is one JSON value that decodeStrict would
// take as a member's value: valid, valid UTF-8, no lone surrogate escape,
// no duplicate member in any object.
func validStrict(b []byte) bool {
	return json.Valid(b) && checkJSONText(b) == nil && checkMembers(b, nil) == nil
}

func hasPrefixAt(b []byte, i int, s string) bool {
	return len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

// compositeEnd finds the end of the object or array at b[i] by its
// brackets, skipping strings; validStrict then checks what lies between.
func compositeEnd(b []byte, i int) (int, bool) {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			for j++; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}

// The setters store one member's value and report whether it had the
// member's type.

func setU64(dst **uint64, v jsonValue) bool {
	if v.kind != 'n' {
		return false
	}
	n, err := strconv.ParseUint(string(v.text), 10, 64)
	*dst = &n
	return err == nil
}

func setInt64(dst *int64, v jsonValue) bool {
	if v.kind != 'n' {
		return false
	}
	n, err := strconv.ParseInt(string(v.text), 10, 64)
	*dst = n
	return err == nil
}

func setStr(dst *string, v jsonValue) bool {
	*dst = string(v.text)
	return v.kind == 's'
}

func setOptStr(dst **string, v jsonValue) bool {
	s := string(v.text)
	*dst = &s
	return v.kind == 's'
}

func setBool(dst *bool, v jsonValue) bool {
	*dst = v.kind == 't'
	return v.kind == 't' || v.kind == 'f'
}

// setRaw stores the value's JSON bytes, for a json.RawMessage member.
func setRaw(dst *json.RawMessage, v jsonValue) bool {
	switch v.kind {
	case 'r', 'n':
		*dst = append(json.RawMessage(nil), v.text...)
	case 's':
		*dst = append(append(append(json.RawMessage(nil), '"'), v.text...), '"')
	case 't':
		*dst = json.RawMessage("true")
	case 'f':
		*dst = json.RawMessage("false")
	default:
		return false
	}
	return true
}

// fillFast decodes b into *dst: member sets one member of out and reports
// whether it could, calling first(bit) with the member's own bit, which is
// false for a repeated member (encoding/json keeps the last; the slow path
// judges). On false, *dst is unchanged.
func fillFast[T any](b []byte, dst *T, member func(out *T, name string, v jsonValue, first func(bit uint16) bool) bool) bool {
	var out T
	var seen uint16
	first := func(bit uint16) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	if !scanObject(b, func(name string, v jsonValue) bool { return member(&out, name, v, first) }) {
		return false
	}
	*dst = out
	return true
}

func (req *queueClaimRequest) decodeFast(b []byte) bool {
	return fillFast(b, req, func(out *queueClaimRequest, name string, v jsonValue, first func(uint16) bool) bool {
		switch name {
		case "owner":
			return setStr(&out.Owner, v) && first(1)
		case "lease_ms":
			return setInt64(&out.LeaseMs, v) && first(2)
		case "wait_ms":
			return setInt64(&out.WaitMs, v) && first(4)
		case "set_status":
			return setOptStr(&out.SetStatus, v) && first(8)
		}
		return false // statuses, or a name decodeStrict must judge
	})
}

func (req *taskUpdateRequest) decodeFast(b []byte) bool {
	return fillFast(b, req, func(out *taskUpdateRequest, name string, v jsonValue, first func(uint16) bool) bool {
		switch name {
		case "fencing_token":
			return setU64(&out.FencingToken, v) && first(1)
		case "expect_version":
			return setU64(&out.ExpectVersion, v) && first(2)
		case "expect_status":
			return setOptStr(&out.ExpectStatus, v) && first(4)
		case "status":
			return setOptStr(&out.Status, v) && first(8)
		case "artifact_id":
			return setOptStr(&out.ArtifactID, v) && first(16)
		case "result":
			return setRaw(&out.Result, v) && first(32)
		case "payload":
			return setRaw(&out.Payload, v) && first(64)
		case "release":
			return setBool(&out.Release, v) && first(128)
		}
		return false
	})
}
