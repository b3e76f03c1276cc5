package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// Error codes the server itself produces (package wire defines every
// code; the FSM's are in package fsm).
const (
	codeUnauthenticated  = wire.CodeUnauthenticated
	codeDigestMismatch   = wire.CodeDigestMismatch
	codeCompacted        = wire.CodeCompacted
	codeTooLarge         = wire.CodeTooLarge
	codeUnavailable      = wire.CodeUnavailable
	codeOutcomeUnknown   = wire.CodeOutcomeUnknown
	codeMethodNotAllowed = wire.CodeMethodNotAllowed
	codeInternal         = wire.CodeInternal
	codeRateLimited      = wire.CodeRateLimited
)

// statusOf is wire's table from error codes to HTTP statuses.
var statusOf = wire.Status

// apiError is an error the handler answers with.
type apiError struct {
	Code    string
	Message string
	Details map[string]any
	// retryAfter, in seconds, is sent as Retry-After when positive.
	retryAfter int
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return errorf(fsm.CodeInvalidArgument, format, args...)
}

// writeError writes err as the error object of docs/api.md.
func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = errorf(codeInternal, "%v", err)
	}
	body := map[string]any{}
	for k, v := range ae.Details {
		body[k] = v
	}
	body["code"] = ae.Code
	body["message"] = ae.Message
	status, ok := statusOf[ae.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status == http.StatusServiceUnavailable || ae.Code == codeOutcomeUnknown {
		// For outcome_unknown it says when a retry with the same
		// Idempotency-Key or session place may find a leader, not that
		// a retry without them is safe.
		w.Header().Set("Retry-After", "1")
	}
	if ae.retryAfter > 0 {
		setRetryAfter(w, ae.retryAfter)
	}
	writeJSON(w, status, map[string]any{"error": body})
}

// resultError turns a failed FSM result into an apiError.
func resultError(r *fsm.Result) *apiError {
	ae := &apiError{Code: r.Code, Message: r.Message}
	if len(r.Details) > 0 {
		_ = json.Unmarshal(r.Details, &ae.Details)
	}
	return ae
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"encoding failed"}}`)
	}
	writeRawJSON(w, status, b)
}

func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte("\n"))
}

// setIndex sets X-Baton-Index, the log index an answer reflects, and
// X-Baton-Position, the same point in the unit of fencing tokens and KV
// versions (log index << 16 | the command's place in its entry): the
// highest position of the entry at index, so that every token or version
// the answer's state holds is at most it and every later one is above it.
func setIndex(w http.ResponseWriter, index uint64) {
	h := w.Header()
	h.Set("X-Baton-Index", strconv.FormatUint(index, 10))
	h.Set("X-Baton-Position", strconv.FormatUint(index<<16|0xFFFF, 10))
}
