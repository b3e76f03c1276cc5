package fsm

import (
	"encoding/json"
	"fmt"
	"time"
)

// TimeFormat is the wire format of timestamps: RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatMillis renders Unix milliseconds (from a command, never a clock).
func FormatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(TimeFormat)
}

func hex16(v int64) string { return fmt.Sprintf("%016x", uint64(v)) }

// jsonOrNull makes an absent JSON value explicit.
func jsonOrNull(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
