// Package wire is the vocabulary of Baton's HTTP API that the server, the
// state machine and the SDK share: the error codes of the error object and
// their HTTP statuses, the format of watch event ids, the body of every
// request a server handler decodes (requests.go), and the response bodies
// that both sides use as they are (responses.go). Records the state
// machine renders in answers (tasks, KV entries, manifests, refs,
// checkpoints, ops) are not here: fsm defines them, and the SDK reads them
// into types of its own with time.Time and time.Duration fields.
//
// Types are named by resource and action (TaskCreate, QueueClaim), each
// with a comment naming its route, and a field has one spelling
// everywhere: a duration in milliseconds is XxxMs, as its member is
// xxx_ms. The SDK sends these types, or converts its own request types to
// them, so their member order and omitempty are the bytes it sends.
//
// It imports no Baton package, so every layer may import it; a code, a
// format or a body defined here is defined nowhere else.
package wire

import (
	"net/http"
	"strconv"
	"strings"
)

// Error codes: the "code" of the API's error object.
const (
	CodeInvalidArgument     = "invalid_argument"
	CodeDigestMismatch      = "digest_mismatch"
	CodeMissingChunks       = "missing_chunks"
	CodeUnauthenticated     = "unauthenticated"
	CodeForbidden           = "forbidden"
	CodeNotFound            = "not_found"
	CodeMethodNotAllowed    = "method_not_allowed"
	CodeAlreadyExists       = "already_exists"
	CodeLeaseHeld           = "lease_held"
	CodeFenced              = "fenced"
	CodeVersionMismatch     = "version_mismatch"
	CodeIdempotencyMismatch = "idempotency_mismatch"
	CodeIdempotencyExpired  = "idempotency_expired"
	CodeCompacted           = "compacted"
	CodeTooLarge            = "too_large"
	CodeRateLimited         = "rate_limited"
	CodeInternal            = "internal"
	CodeUnavailable         = "unavailable"
	CodeOutcomeUnknown      = "outcome_unknown"
	CodeResourceExhausted   = "resource_exhausted"
	CodeReferenced          = "referenced"
)

// Status is the one table from error codes to HTTP statuses: every code
// the server may answer with is a key.
var Status = map[string]int{
	CodeInvalidArgument:     http.StatusBadRequest,
	CodeDigestMismatch:      http.StatusBadRequest,
	CodeMissingChunks:       http.StatusBadRequest,
	CodeUnauthenticated:     http.StatusUnauthorized,
	CodeForbidden:           http.StatusForbidden,
	CodeNotFound:            http.StatusNotFound,
	CodeMethodNotAllowed:    http.StatusMethodNotAllowed,
	CodeAlreadyExists:       http.StatusConflict,
	CodeLeaseHeld:           http.StatusConflict,
	CodeFenced:              http.StatusConflict,
	CodeVersionMismatch:     http.StatusConflict,
	CodeIdempotencyMismatch: http.StatusConflict,
	CodeIdempotencyExpired:  http.StatusConflict,
	CodeCompacted:           http.StatusGone,
	CodeTooLarge:            http.StatusRequestEntityTooLarge,
	CodeRateLimited:         http.StatusTooManyRequests,
	CodeInternal:            http.StatusInternalServerError,
	CodeUnavailable:         http.StatusServiceUnavailable,
	CodeOutcomeUnknown:      http.StatusGatewayTimeout,
	CodeResourceExhausted:   http.StatusInsufficientStorage,
	CodeReferenced:          http.StatusConflict,
}

// EventPos is a watch event's place in the stream: event Pos of the log
// entry at Index, or, with Pos -1, the last event of that entry. An event
// id is "INDEX" on the last event of an entry and "INDEX.POS" on the
// others, so a watch resumed after an id continues exactly there.
type EventPos struct {
	Index uint64
	Pos   int
}

// ParseEventID parses an event id ("INDEX" or "INDEX.POS").
func ParseEventID(id string) (EventPos, bool) {
	idx, pos, hasPos := strings.Cut(id, ".")
	n, err := strconv.ParseUint(idx, 10, 64)
	if err != nil {
		return EventPos{}, false
	}
	p := EventPos{Index: n, Pos: -1}
	if hasPos {
		if p.Pos, err = strconv.Atoi(pos); err != nil || p.Pos < 0 {
			return EventPos{}, false
		}
	}
	return p, true
}

// String is p's event id.
func (p EventPos) String() string {
	if p.Pos < 0 {
		return strconv.FormatUint(p.Index, 10)
	}
	return strconv.FormatUint(p.Index, 10) + "." + strconv.Itoa(p.Pos)
}

// After reports whether p comes strictly after q in the stream.
func (p EventPos) After(q EventPos) bool {
	switch {
	case p.Index != q.Index:
		return p.Index > q.Index
	case q.Pos < 0:
		return false
	}
	return p.Pos < 0 || p.Pos > q.Pos
}
