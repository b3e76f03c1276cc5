package replica

import (
	"bytes"
	"strconv"
	"sync"
	"time"

	"github.com/baton-dev/baton/fsm"
)

// emptyClaims remembers, on this node only, the keyed queue claims it
// answered 204 without proposing anything: an empty claim writes nothing
// to the log, with an Idempotency-Key or a session place or without. A
// late duplicate of such a request (an attempt held up in a paused node
// while the client's retry was answered elsewhere) that reaches this node
// is answered 204 again instead of claiming a task nobody would work on.
// It is a bounded, best-effort memory: after a leadership change a late
// duplicate reaching the new leader can claim a task, which its lease then
// gives back, as with a worker that died (docs/api.md).
type emptyClaims struct {
	mu    sync.Mutex
	byKey map[string]emptyClaim
	order []string // oldest first, for the bound
}

type emptyClaim struct {
	fp      []byte
	expires time.Time
}

const (
	emptyClaimsMax = 8192
	emptyClaimsTTL = 2 * time.Minute
)

// emptyClaimKey is what identifies the retries of a request, or "".
func emptyClaimKey(c *fsm.Command) string {
	switch {
	case c.IdemKey != "":
		return c.Tenant + "\x00" + c.Principal + "\x00k\x00" + c.IdemKey
	case c.Session != 0:
		return "s\x00" + strconv.FormatUint(c.Session, 10) + "\x00" + strconv.FormatUint(c.Seq, 10)
	}
	return ""
}

// answered reports whether this node answered c 204 without proposing,
// within emptyClaimsTTL.
func (e *emptyClaims) answered(c *fsm.Command, now time.Time) bool {
	k := emptyClaimKey(c)
	if k == "" {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ec, ok := e.byKey[k]
	return ok && now.Before(ec.expires) && bytes.Equal(ec.fp, c.IdemFP)
}

// add remembers that c was answered 204 without proposing.
func (e *emptyClaims) add(c *fsm.Command, now time.Time) {
	k := emptyClaimKey(c)
	if k == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byKey == nil {
		e.byKey = map[string]emptyClaim{}
	}
	for len(e.order) > 0 && (len(e.byKey) >= emptyClaimsMax || !now.Before(e.byKey[e.order[0]].expires)) {
		delete(e.byKey, e.order[0])
		e.order = e.order[1:]
	}
	if _, ok := e.byKey[k]; !ok {
		e.order = append(e.order, k)
	}
	e.byKey[k] = emptyClaim{fp: c.IdemFP, expires: now.Add(emptyClaimsTTL)}
}
