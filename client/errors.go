package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/baton-dev/baton/fsm/wire"
)

// Sentinel errors, one per error code of docs/api.md. An *Error returned by the
// client matches (errors.Is) the sentinel of its code. The text of each
// sentinel is its wire code.
var (
	ErrInvalidArgument     = errors.New("invalid_argument")     // 400: malformed request, bad name, missing or unknown field
	ErrDigestMismatch      = errors.New("digest_mismatch")      // 400: content does not hash to its digest
	ErrMissingChunks       = errors.New("missing_chunks")       // 400: an artifact names chunks the tenant lacks; details: missing
	ErrUnauthenticated     = errors.New("unauthenticated")      // 401: no token, unknown or revoked token
	ErrForbidden           = errors.New("forbidden")            // 403: no grant, or another tenant's path
	ErrNotFound            = errors.New("not_found")            // 404: no such object
	ErrAlreadyExists       = errors.New("already_exists")       // 409: create of an existing id with different content
	ErrLeaseHeld           = errors.New("lease_held")           // 409: a live lease belongs to someone else; details: owner, lease_until
	ErrFenced              = errors.New("fenced")               // 409: fencing token is not current; details: current_token
	ErrVersionMismatch     = errors.New("version_mismatch")     // 409: an expect_* condition failed; details: the current value
	ErrIdempotencyMismatch = errors.New("idempotency_mismatch") // 409: key or op id reused with a different request
	ErrIdempotencyExpired  = errors.New("idempotency_expired")  // 409: a retry older than what the cluster remembers, refused rather than applied twice
	ErrResourceExhausted   = errors.New("resource_exhausted")   // 507: the write would grow the state past a quota
	ErrRateLimited         = errors.New("rate_limited")         // 429: over the principal's request rate or watch cap; Retry-After set
	ErrCompacted           = errors.New("compacted")            // 410: watch resumed below the retained history
	ErrTooLarge            = errors.New("too_large")            // 413: body over the limit
	ErrUnavailable         = errors.New("unavailable")          // 503 or no endpoint reachable: no leader or no quorum; nothing was done, unless the error also matches ErrOutcomeUnknown
	ErrOutcomeUnknown      = errors.New("outcome_unknown")      // 504, or a write that ran out of attempts after one got no answer: it may have been applied; retry only with the same key or session place
	ErrMethodNotAllowed    = errors.New("method_not_allowed")   // 405: the path exists, the method does not
	ErrInternal            = errors.New("internal")             // 500: a bug in the server
	ErrReferenced          = errors.New("referenced")           // 409: deleting an artifact version a ref points at; details: refs
)

// sentinels is the one table from wire codes to sentinel errors; it has
// one for every code of wire.Status (errors_test.go checks).
var sentinels = map[string]error{
	wire.CodeInvalidArgument:     ErrInvalidArgument,
	wire.CodeDigestMismatch:      ErrDigestMismatch,
	wire.CodeMissingChunks:       ErrMissingChunks,
	wire.CodeUnauthenticated:     ErrUnauthenticated,
	wire.CodeForbidden:           ErrForbidden,
	wire.CodeNotFound:            ErrNotFound,
	wire.CodeMethodNotAllowed:    ErrMethodNotAllowed,
	wire.CodeAlreadyExists:       ErrAlreadyExists,
	wire.CodeLeaseHeld:           ErrLeaseHeld,
	wire.CodeFenced:              ErrFenced,
	wire.CodeVersionMismatch:     ErrVersionMismatch,
	wire.CodeIdempotencyMismatch: ErrIdempotencyMismatch,
	wire.CodeIdempotencyExpired:  ErrIdempotencyExpired,
	wire.CodeResourceExhausted:   ErrResourceExhausted,
	wire.CodeRateLimited:         ErrRateLimited,
	wire.CodeCompacted:           ErrCompacted,
	wire.CodeTooLarge:            ErrTooLarge,
	wire.CodeInternal:            ErrInternal,
	wire.CodeUnavailable:         ErrUnavailable,
	wire.CodeOutcomeUnknown:      ErrOutcomeUnknown,
	wire.CodeReferenced:          ErrReferenced,
}

// statusCodes gives a code to error responses whose body is not a Baton
// error object (a proxy, or a router answering before the API does).
var statusCodes = map[int]string{
	http.StatusBadRequest:            "invalid_argument",
	http.StatusUnauthorized:          "unauthenticated",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not_found",
	http.StatusGone:                  "compacted",
	http.StatusRequestEntityTooLarge: "too_large",
	http.StatusTooManyRequests:       "rate_limited",
	http.StatusServiceUnavailable:    "unavailable",
	http.StatusGatewayTimeout:        "outcome_unknown",
}

// Error is an error response from the server.
type Error struct {
	Status  int            // HTTP status
	Code    string         // wire code, e.g. "fenced"
	Message string         // human-readable explanation from the server
	Details map[string]any // remaining fields of the error object; numbers are json.Number
	Index   uint64         // X-Baton-Index of the response, if any
}

// Error returns "code: message".
func (e *Error) Error() string {
	switch {
	case e.Code == "":
		return fmt.Sprintf("http %d: %s", e.Status, e.Message)
	case e.Message == "":
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Is reports whether target is the sentinel error of e's code.
func (e *Error) Is(target error) bool {
	s, ok := sentinels[e.Code]
	return ok && s == target
}

// DetailString returns a string detail, such as "owner" of lease_held.
func (e *Error) DetailString(key string) (string, bool) {
	s, ok := e.Details[key].(string)
	return s, ok
}

// DetailUint returns a non-negative integer detail, such as "current_token"
// of fenced or "op_index" of a failed transaction.
func (e *Error) DetailUint(key string) (uint64, bool) {
	switch v := e.Details[key].(type) {
	case json.Number:
		n, err := strconv.ParseUint(v.String(), 10, 64)
		return n, err == nil
	case float64:
		if v >= 0 && v == float64(uint64(v)) {
			return uint64(v), true
		}
	}
	return 0, false
}

// OpIndex returns the index of the transaction op that failed, when e comes
// from Txn.
func (e *Error) OpIndex() (int, bool) {
	n, ok := e.DetailUint("op_index")
	return int(n), ok
}

// decodeError builds an *Error from a non-2xx response.
func decodeError(status int, index uint64, body []byte) *Error {
	e := &Error{Status: status, Index: index}
	var wire struct {
		Error map[string]any `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if dec.Decode(&wire) != nil || wire.Error == nil {
		e.Code = statusCodes[status]
		e.Message = strings.TrimSpace(string(body))
		if e.Message == "" {
			e.Message = http.StatusText(status)
		}
		return e
	}
	e.Code, _ = wire.Error["code"].(string)
	e.Message, _ = wire.Error["message"].(string)
	delete(wire.Error, "code")
	delete(wire.Error, "message")
	if len(wire.Error) > 0 {
		e.Details = wire.Error
	}
	return e
}
