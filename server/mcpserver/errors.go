package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/client"
)

// explain turns a call's error into the tool error the model reads: what
// happened and what to do about it. A fenced write also ends the session's
// claim: the lease is gone, whatever the session believed.
func (s *Session) explain(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, client.ErrOutcomeUnknown) {
		return fmt.Errorf("%s: the outcome is unknown (%v): the write may or may not have been applied; check with a read before trying again", what, err)
	}
	var e *client.Error
	if !errors.As(err, &e) {
		switch {
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			return fmt.Errorf("%s: the call was cut short (%v); nothing is known to be done: check with a read, then try again", what, err)
		case errors.Is(err, client.ErrUnavailable):
			return fmt.Errorf("%s: the Baton cluster is unavailable right now (%v); nothing was done: try again in a few seconds", what, err)
		case errors.Is(err, client.ErrInvalidArgument):
			return fmt.Errorf("%s: invalid argument: %v; fix the arguments and call again", what, err)
		}
		return fmt.Errorf("%s: %v", what, err)
	}
	switch {
	case errors.Is(err, client.ErrFenced):
		s.mu.Lock()
		cl := s.claim
		s.mu.Unlock()
		if cl != nil {
			lost := lostError(cl, err)
			s.drop(cl)
			return lost
		}
		return fmt.Errorf("%s: refused, fenced: %s; the task's lease belongs to another worker: stop working on it", what, e.Message)
	case errors.Is(err, client.ErrLeaseHeld):
		owner, _ := e.DetailString("owner")
		return fmt.Errorf("%s: another worker (%q) holds a live lease on that task: %s; pick another task or try later", what, owner, e.Message)
	case errors.Is(err, client.ErrVersionMismatch):
		return fmt.Errorf("%s: the condition you gave no longer holds: %s; read the current value, then decide again", what, e.Message)
	case errors.Is(err, client.ErrNotFound):
		return fmt.Errorf("%s: not found: %s", what, e.Message)
	case errors.Is(err, client.ErrAlreadyExists):
		return fmt.Errorf("%s: already exists: %s; choose another id, or read the existing one", what, e.Message)
	case errors.Is(err, client.ErrForbidden):
		return fmt.Errorf("%s: forbidden: %s; your token has no grant for this: ask the operator, do not retry", what, e.Message)
	case errors.Is(err, client.ErrUnauthenticated):
		return fmt.Errorf("%s: the cluster refused the token: %s; the token is unknown or revoked", what, e.Message)
	case errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrMissingChunks), errors.Is(err, client.ErrDigestMismatch):
		return fmt.Errorf("%s: invalid argument: %s; fix the arguments and call again", what, e.Message)
	case errors.Is(err, client.ErrTooLarge):
		return fmt.Errorf("%s: too large: %s; send less", what, e.Message)
	case errors.Is(err, client.ErrRateLimited):
		return fmt.Errorf("%s: rate limited: %s; wait a few seconds, then try again", what, e.Message)
	case errors.Is(err, client.ErrResourceExhausted):
		return fmt.Errorf("%s: the tenant is at its quota: %s; delete what is no longer needed, or ask the operator", what, e.Message)
	case errors.Is(err, client.ErrIdempotencyMismatch):
		return fmt.Errorf("%s: that id was used before with other parameters: %s; use another id", what, e.Message)
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrOutcomeUnknown):
		return fmt.Errorf("%s: the cluster could not answer (%s): %s; check with a read whether it was done, then try again", what, e.Code, e.Message)
	}
	return fmt.Errorf("%s: %s: %s", what, e.Code, e.Message)
}
