package fsm

import (
	"encoding/json"
	"time"
)

// TimeFormat is the wire format of timestamps: RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatMillis renders Unix milliseconds (from a command, never a clock).
func FormatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(TimeFormat)
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
