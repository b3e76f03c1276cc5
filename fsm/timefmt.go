package fsm

import (
	"encoding/json"
	"strings"
	"time"
)

// TimeFormat is the wire format of timestamps: RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatMillis renders Unix milliseconds (from a command, never a clock).
func FormatMillis(ms int64) string {
	var b [32]byte
	return string(appendMillis(b[:0], ms))
}

// appendMillis appends ms as TimeFormat. Every answer about a task renders
// two or three timestamps on every replica (the idempotency record keeps
// the answer), so years 0 to 9999 are written digit by digit rather than
// by interpreting the layout each time; others (never a real clock's) go
// through time.AppendFormat.
func appendMillis(b []byte, ms int64) []byte {
	t := time.UnixMilli(ms).UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeFormat)
	}
	hour, min, sec := t.Clock()
	milli := t.Nanosecond() / 1e6
	d := func(b []byte, v, n int) []byte { // v as n decimal digits
		var buf [4]byte
		for i := n - 1; i >= 0; i-- {
			buf[i] = byte('0' + v%10)
			v /= 10
		}
		return append(b, buf[:n]...)
	}
	b = d(b, year, 4)
	b = append(b, '-')
	b = d(b, int(month), 2)
	b = append(b, '-')
	b = d(b, day, 2)
	b = append(b, 'T')
	b = d(b, hour, 2)
	b = append(b, ':')
	b = d(b, min, 2)
	b = append(b, ':')
	b = d(b, sec, 2)
	b = append(b, '.')
	b = d(b, milli, 3)
	return append(b, 'Z')
}

func hex16(v int64) string { return hexU16(uint64(v)) }

// hexU16 is v as 16 lower-case hex digits (fmt's %016x).
func hexU16(v uint64) string {
	var b [16]byte
	return string(appendHex16(b[:0], v))
}

// appendHex16 appends v as 16 lower-case hex digits.
func appendHex16(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[(v>>uint(shift))&0xf])
	}
	return b
}

// jsonOrNull makes an absent JSON value explicit.
func jsonOrNull(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// dueEntry is one entry of a time index, whose keys are prefix +
// hex16(ms) + "/" + tenant + "/" + id (task expiries, cancellations,
// waitpoint timeouts).
type dueEntry struct {
	key, tenant, id string
	at              int64 // the ms of the key
}

// dueEntries returns, oldest first, at most limit entries of the time
// index under prefix whose time is at or before now; it stops at the
// first later (or malformed) key.
func dueEntries(st *Store, prefix string, now int64, limit int) []dueEntry {
	var due []dueEntry
	at := hex16(now)
	st.Scan(prefix, "", func(k string, _ []byte) bool {
		rest := k[len(prefix):]
		if len(due) >= limit || len(rest) < 17 || rest[:16] > at {
			return false
		}
		tenant, id, _ := strings.Cut(rest[17:], "/")
		due = append(due, dueEntry{k, tenant, id, parseHex16(rest[:16])})
		return true
	})
	return due
}
