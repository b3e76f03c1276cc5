package fsm

import (
	"encoding/json"
	"strconv"
)

// A hand-written encoder for the task, the answer of most writes: about a
// fifth of a replica's time per fenced update went to encoding/json
// (reflection, and compacting MarshalJSON's output a second time). Every
// byte it writes is what json.Marshal would write; values that need
// escaping or compaction go through encoding/json itself, so the fast path
// only ever skips work that would not change the output (jsonfast_test.go
// compares the two on awkward and random inputs).

// plainJSONString reports whether json.Marshal(s) is s between quotes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func appendJSONString(b []byte, s string) []byte {
	if plainJSONString(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	enc, err := json.Marshal(s)
	if err != nil {
		panic("fsm: json: " + err.Error())
	}
	return append(b, enc...)
}

// appendJSONRaw appends a stored JSON value (validated when it came in) as
// json.Marshal writes a json.RawMessage: compacted, with <, >, & and
// U+2028/U+2029 escaped. A value with none of the bytes those steps change
// is appended as it is.
func appendJSONRaw(b []byte, raw []byte) []byte {
	plain := true
	for _, c := range raw {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return append(b, raw...)
	}
	enc, err := json.Marshal(json.RawMessage(raw))
	if err != nil {
		panic("fsm: json: " + err.Error())
	}
	return append(b, enc...)
}

// appendJSONTime appends FormatMillis(ms) quoted.
func appendJSONTime(b []byte, ms int64) []byte {
	b = append(b, '"')
	b = appendMillis(b, ms)
	return append(b, '"')
}

// appendTaskJSON appends the wire form of t (taskJSON's fields, in order).
func appendTaskJSON(b []byte, t *Task) []byte {
	b = append(b, `{"tenant_id":`...)
	b = appendJSONString(b, t.Tenant)
	b = append(b, `,"task_id":`...)
	b = appendJSONString(b, t.ID)
	b = append(b, `,"queue":`...)
	b = appendJSONString(b, t.Queue)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, t.Status)
	b = append(b, `,"owner":`...)
	b = appendJSONString(b, t.Owner)
	b = append(b, `,"lease_until":`...)
	if t.LeaseUntil != 0 {
		b = appendJSONTime(b, t.LeaseUntil)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"fencing_token":`...)
	b = strconv.AppendUint(b, t.FencingToken, 10)
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, t.Version, 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendUint(b, t.Attempt, 10)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, t.Priority, 10)
	b = append(b, `,"artifact_id":`...)
	b = appendJSONString(b, t.ArtifactID)
	b = append(b, `,"payload":`...)
	if len(t.Payload) == 0 {
		b = append(b, "{}"...)
	} else {
		b = appendJSONRaw(b, t.Payload)
	}
	b = append(b, `,"result":`...)
	if len(t.Result) == 0 {
		b = append(b, "null"...)
	} else {
		b = appendJSONRaw(b, t.Result)
	}
	b = append(b, `,"created_at":`...)
	b = appendJSONTime(b, t.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendJSONTime(b, t.UpdatedAt)
	l := t.Life
	if l == nil {
		l = &TaskLife{}
	}
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendUint(b, l.MaxAttempts, 10)
	b = append(b, `,"backoff_initial_ms":`...)
	b = strconv.AppendInt(b, l.BackoffInitialMs, 10)
	b = append(b, `,"backoff_max_ms":`...)
	b = strconv.AppendInt(b, l.BackoffMaxMs, 10)
	b = append(b, `,"available_at":`...)
	if l.AvailableAt != 0 {
		b = appendJSONTime(b, l.AvailableAt)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"last_error":`...)
	b = appendJSONString(b, l.LastError)
	b = append(b, `,"failed_at":`...)
	if l.FailedAt != 0 {
		b = appendJSONTime(b, l.FailedAt)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}
