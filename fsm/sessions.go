package fsm

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Client sessions: exactly-once retries whose cost is per client, not per
// write (the Raft thesis' client sessions, section 6.3; Kafka's idempotent
// producer).
//
// A client opens a session (KindSessionOpen); its id is the log position
// of the open, so ids only grow. It numbers its writes 1, 2, 3, ... (Seq)
// and sends with each the lowest number it still waits for (Ack): every
// write below Ack is finished for the client, so its answer may go. The
// state keeps, per session, the answers of the writes at or above Ack, and
// Floor: every Seq at or below Floor that has no answer kept is finished
// (applied and its answer dropped, or abandoned by the client). A write
// whose (session, Seq) has an answer is answered again from it and applies
// nothing; one at or below Floor, or on a session that is unknown or
// expired, is refused with idempotency_expired and applies nothing. So a
// write is applied at most once however often it is retried, on any node,
// across leader changes, restarts and snapshot restores, and the state
// grows with the number of live sessions and of writes each has in flight.
//
// Bounds, all replicated (Limits) so that every replica evicts the same:
// a session unused for SessionTTL expires; one keeps at most
// MaxSessionAnswers answers and MaxSessionAnswerBytes bytes of them (past
// either the lowest Seq is dropped and Floor raised to it); all sessions
// together keep at most SessionBytes, and a tenant at most
// SessionsPerTenant sessions and SessionTenantBytes bytes, the least
// recently used dropped first (a tenant's own first, at its budget).
//
// Keys:
//
//	ss/<owner tenant>/<principal>/<id, 16 hex>   session record
//	sa/<id, 16 hex>/<seq, 16 hex>                remembered answer (idemRecord)
//	se/<expiry ms, 16 hex>/<ss/ key>             expiry index, least recently used first
//
// The owner tenant is "" for the admin, whose one session serves every
// tenant; a principal's session is found only under its own tenant and
// name, so no one can use another's.

// KindSessionOpen opens a client session (args: SessionOpenArgs).
const KindSessionOpen Kind = "session.open"

// SessionOpenArgs opens a session; the TTL is the replicated limit's.
type SessionOpenArgs struct{}

// SessionView is the answer to a session open.
type SessionView struct {
	SessionID string `json:"session_id"`
	TTLMs     int64  `json:"ttl_ms"`
}

// Per-session bounds on remembered answers.
const (
	MaxSessionAnswers     = 1024
	MaxSessionAnswerBytes = 4 << 20
	// sessionRecordBytes is what a session's record and index entry count
	// for in the session budget, besides its answers.
	sessionRecordBytes = 256
	// answerOverhead is what an answer counts for besides its bytes.
	answerOverhead = 64
)

type sessionRecord struct {
	ID      uint64
	Floor   uint64
	Expires int64
	TTL     int64
	Answers int64 // how many answers are kept
	Bytes   int64 // what they count for
}

const (
	sessionPrefix       = "ss/"
	sessionAnswerPrefix = "sa/"
	sessionExpiryPrefix = "se/"
)

func sessionOwner(c *Command) string {
	if c.Principal == "" {
		return ""
	}
	return c.Tenant
}

// sessionsOf is the prefix of principal's sessions under owner.
func sessionsOf(owner, principal string) string { return sessionPrefix + owner + "/" + principal + "/" }

func sessionKey(owner, principal string, id uint64) string {
	return sessionsOf(owner, principal) + hexU16(id)
}

func sessionAnswersOf(id uint64) string { return sessionAnswerPrefix + hexU16(id) + "/" }

func sessionAnswerKey(id, seq uint64) string { return sessionAnswersOf(id) + hexU16(seq) }

func sessionExpiryKey(exp int64, skey string) string {
	return sessionExpiryPrefix + hex16(exp) + "/" + skey
}

func applySessionOpen(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a SessionOpenArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if c.Session != 0 {
		return fail(CodeInvalidArgument, "a session open cannot itself be part of a session", nil)
	}
	lim := f.limits()
	owner := sessionOwner(c)
	f.trimTenantSessions(owner, lim.SessionsPerTenant-1)
	rec := sessionRecord{ID: ctx.nextSeq(), Expires: ctx.now + lim.SessionTTL, TTL: lim.SessionTTL}
	key := sessionKey(owner, c.Principal, rec.ID)
	f.st.Put(key, encode(&rec))
	f.st.Put(sessionExpiryKey(rec.Expires, key), nil)
	f.countSession(owner, sessionRecordBytes)
	f.noteSessionExpiry(rec.Expires)
	f.evictTenantSessions(owner, lim.SessionTenantBytes, key)
	f.evictSessions(lim.SessionBytes, key)
	return okValue(OutcomeCreated, SessionView{SessionID: strconv.FormatUint(rec.ID, 10), TTLMs: rec.TTL})
}

// trimTenantSessions drops the least recently used sessions of owner until
// at most keep remain.
func (f *FSM) trimTenantSessions(owner string, keep int64) {
	type live struct {
		key     string
		expires int64
	}
	var all []live
	f.st.Scan(sessionPrefix+owner+"/", "", func(k string, v []byte) bool {
		var rec sessionRecord
		if decode(v, &rec) == nil {
			all = append(all, live{k, rec.Expires})
		}
		return true
	})
	for int64(len(all)) > keep && len(all) > 0 {
		oldest := 0
		for i, s := range all {
			if s.expires < all[oldest].expires || (s.expires == all[oldest].expires && s.key < all[oldest].key) {
				oldest = i
			}
		}
		f.dropSession(all[oldest].key)
		all = append(all[:oldest], all[oldest+1:]...)
	}
}

// sessionWrite is a session command's record, found before it applies.
type sessionWrite struct {
	key string
	rec sessionRecord
}

// sessionCheck looks c up in its session: the remembered answer (a
// replay), a refusal, or, for a write to apply, the session it goes to.
func (f *FSM) sessionCheck(ctx *applyCtx, c *Command) (*Result, *sessionWrite) {
	if c.Seq == 0 || c.Ack > c.Seq {
		return fail(CodeInvalidArgument, fmt.Sprintf("session write %d with ack %d: numbers start at 1 and the ack is at most the write's", c.Seq, c.Ack), nil), nil
	}
	key := sessionKey(sessionOwner(c), c.Principal, c.Session)
	raw, ok := f.st.Get(key)
	var rec sessionRecord
	if !ok || decode(raw, &rec) != nil || rec.Expires <= ctx.now {
		return fail(CodeIdempotencyExpired, fmt.Sprintf("session %d is unknown or expired: nothing was applied; open a new session", c.Session),
			map[string]any{"session_id": strconv.FormatUint(c.Session, 10), "reason": "session"}), nil
	}
	if raw, ok := f.st.Get(sessionAnswerKey(c.Session, c.Seq)); ok {
		var ans idemRecord
		if decode(raw, &ans) == nil {
			if !bytes.Equal(ans.FP, c.IdemFP) {
				return fail(CodeIdempotencyMismatch, fmt.Sprintf("write %d of session %d was a different request", c.Seq, c.Session), nil), nil
			}
			r := ans.Result
			r.Replay = true
			return &r, nil
		}
	}
	if c.Seq <= rec.Floor {
		return fail(CodeIdempotencyExpired, fmt.Sprintf("write %d of session %d is at or below what the session still remembers (%d): nothing was applied", c.Seq, c.Session, rec.Floor),
			map[string]any{"session_id": strconv.FormatUint(c.Session, 10), "reason": "seq", "floor": rec.Floor}), nil
	}
	return nil, &sessionWrite{key: key, rec: rec}
}

// sessionRemember records r as the answer to c in its session, drops the
// answers the client acknowledged, extends the session's life and keeps
// every bound.
func (f *FSM) sessionRemember(ctx *applyCtx, c *Command, s *sessionWrite, r *Result) {
	if _, ok := f.st.Get(s.key); !ok {
		return // the command itself dropped the session (limits.set)
	}
	rec := s.rec
	before := rec.Bytes
	if c.Ack > 0 && c.Ack-1 > rec.Floor {
		f.dropAnswers(&rec, c.Ack-1)
	}
	if remembered(c, r) {
		r.JSON() // the record keeps the encoded answer
		ans := idemRecord{FP: c.IdemFP, Result: *r}
		ans.Result.Index = ctx.index
		b := encode(&ans)
		f.st.Put(sessionAnswerKey(c.Session, c.Seq), b)
		rec.Answers++
		rec.Bytes += int64(len(b)) + answerOverhead
	}
	for rec.Answers > MaxSessionAnswers || (rec.Bytes > MaxSessionAnswerBytes && rec.Answers > 1) {
		f.dropLowestAnswer(&rec)
	}
	if exp := ctx.now + rec.TTL; exp-rec.Expires >= rec.TTL/16 {
		// Moved only once a sixteenth of the TTL has passed: a session
		// lives between 15/16 TTL and TTL after its last write.
		f.st.Delete(sessionExpiryKey(rec.Expires, s.key))
		rec.Expires = exp
		f.st.Put(sessionExpiryKey(rec.Expires, s.key), nil)
		f.noteSessionExpiry(rec.Expires)
	}
	f.st.Put(s.key, encode(&rec))
	f.countSession(sessionKeyOwner(s.key), rec.Bytes-before)
	lim := f.limits()
	f.evictTenantSessions(sessionKeyOwner(s.key), lim.SessionTenantBytes, s.key)
	f.evictSessions(lim.SessionBytes, s.key)
}

// remembered reports whether r is an answer to keep for c's retries. A
// key reused for another request keeps the first answer; a long poll's
// intermediate queue claim that found nothing is not its answer: the next
// round with the same key evaluates the queue afresh. Its final attempt
// (QueueClaimArgs.Final) is remembered like any answer, so that a late
// duplicate of the request replays "nothing" instead of claiming a task
// the client will never hear of.
func remembered(c *Command, r *Result) bool {
	if r.Code == CodeIdempotencyMismatch {
		return false
	}
	return c.Kind != KindTaskQueueClaim || r.Outcome != OutcomeNoContent || queueClaimFinal(c)
}

// dropAnswers drops the answers of rec's session at or below upTo and
// raises its floor there.
func (f *FSM) dropAnswers(rec *sessionRecord, upTo uint64) {
	var keys []string
	var sizes []int64
	f.st.Scan(sessionAnswersOf(rec.ID), "", func(k string, v []byte) bool {
		seq, err := strconv.ParseUint(k[len(k)-16:], 16, 64)
		if err != nil || seq > upTo {
			return false
		}
		keys, sizes = append(keys, k), append(sizes, int64(len(v))+answerOverhead)
		return true
	})
	for i, k := range keys {
		f.st.Delete(k)
		rec.Answers--
		rec.Bytes -= sizes[i]
	}
	rec.Floor = max(rec.Floor, upTo)
}

// dropLowestAnswer drops the answer with the lowest number and raises the
// floor to it: a retry of it, or of any unanswered lower number, is then
// refused rather than applied.
func (f *FSM) dropLowestAnswer(rec *sessionRecord) {
	var key string
	var size int64
	f.st.Scan(sessionAnswersOf(rec.ID), "", func(k string, v []byte) bool {
		key, size = k, int64(len(v))+answerOverhead
		return false
	})
	if key == "" {
		rec.Answers, rec.Bytes = 0, 0 // nothing kept: the counts were off
		return
	}
	seq, _ := strconv.ParseUint(key[len(key)-16:], 16, 64)
	f.st.Delete(key)
	rec.Answers--
	rec.Bytes -= size
	rec.Floor = max(rec.Floor, seq)
}

// dropSession deletes a session with its answers and index entry.
func (f *FSM) dropSession(key string) {
	raw, ok := f.st.Get(key)
	if !ok {
		return
	}
	var rec sessionRecord
	if decode(raw, &rec) == nil {
		var answers []string
		f.st.Scan(sessionAnswersOf(rec.ID), "", func(k string, _ []byte) bool {
			answers = append(answers, k)
			return true
		})
		for _, k := range answers {
			f.st.Delete(k)
		}
		f.st.Delete(sessionExpiryKey(rec.Expires, key))
		f.countSession(sessionKeyOwner(key), -(sessionRecordBytes + rec.Bytes))
	}
	f.st.Delete(key)
}

// sessionKeyOwner is the owner tenant of a session record's key.
func sessionKeyOwner(key string) string {
	owner, _, _ := strings.Cut(strings.TrimPrefix(key, sessionPrefix), "/")
	return owner
}

// sessDelta is a change of one owner's session bytes.
type sessDelta struct {
	owner string
	delta int64
}

// countSession adds delta to the session bytes, in all and of owner, and
// notes it for undoSessionCounts.
func (f *FSM) countSession(owner string, delta int64) {
	f.sessBytes += delta
	f.addTenantSessionBytes(owner, delta)
	f.sessUndo = append(f.sessUndo, sessDelta{owner, delta})
}

func (f *FSM) addTenantSessionBytes(owner string, delta int64) {
	if f.sessTenantBytes == nil {
		f.sessTenantBytes = map[string]int64{}
	}
	if n := f.sessTenantBytes[owner] + delta; n != 0 {
		f.sessTenantBytes[owner] = n
	} else {
		delete(f.sessTenantBytes, owner)
	}
}

// undoSessionCounts takes back the per-owner changes of the command being
// aborted (applyCommand restores sessBytes itself).
func (f *FSM) undoSessionCounts() {
	for i := len(f.sessUndo) - 1; i >= 0; i-- {
		f.addTenantSessionBytes(f.sessUndo[i].owner, -f.sessUndo[i].delta)
	}
	f.sessUndo = f.sessUndo[:0]
}

// evictTenantSessions drops owner's least recently used sessions, never
// keep, while they count for more than budget (0: no bound). The work is
// the owner's sessions, at most SessionsPerTenant.
func (f *FSM) evictTenantSessions(owner string, budget int64, keep string) {
	if budget <= 0 || f.sessTenantBytes[owner] <= budget {
		return
	}
	type live struct {
		key     string
		expires int64
	}
	var all []live
	f.st.Scan(sessionPrefix+owner+"/", "", func(k string, v []byte) bool {
		var rec sessionRecord
		if k != keep && decode(v, &rec) == nil {
			all = append(all, live{k, rec.Expires})
		}
		return true
	})
	sort.Slice(all, func(i, j int) bool {
		if all[i].expires != all[j].expires {
			return all[i].expires < all[j].expires
		}
		return all[i].key < all[j].key
	})
	for _, s := range all {
		if f.sessTenantBytes[owner] <= budget {
			return
		}
		f.dropSession(s.key)
	}
}

// evictAllTenantSessions brings every owner within budget (a limits.set),
// owners in name order.
func (f *FSM) evictAllTenantSessions(budget int64) {
	if budget <= 0 {
		return
	}
	var over []string
	for owner, n := range f.sessTenantBytes {
		if n > budget {
			over = append(over, owner)
		}
	}
	sort.Strings(over)
	for _, owner := range over {
		f.evictTenantSessions(owner, budget, "")
	}
}

// evictSessions drops the least recently used sessions, never keep, while
// all sessions together count for more than budget.
func (f *FSM) evictSessions(budget int64, keep string) {
	for f.sessBytes > budget {
		var victim string
		f.st.Scan(sessionExpiryPrefix, "", func(k string, _ []byte) bool {
			if skey := k[len(sessionExpiryPrefix)+17:]; skey != keep {
				victim = skey
				return false
			}
			return true
		})
		if victim == "" {
			return
		}
		f.dropSession(victim)
	}
}

// noteSessionExpiry keeps sessNextExpiry at or before every expiry.
func (f *FSM) noteSessionExpiry(exp int64) {
	if exp < f.sessNextExpiry {
		f.sessNextExpiry = exp
	}
}

// purgeSessions drops at most max sessions that expired by now. As for
// idempotency records, the work per command is bounded and skipped while
// nothing is due.
func (f *FSM) purgeSessions(now int64, max int) {
	if now < f.sessNextExpiry {
		return
	}
	var expired []string
	next := int64(math.MaxInt64)
	due := hex16(now)
	f.st.Scan(sessionExpiryPrefix, "", func(k string, _ []byte) bool {
		if len(expired) >= max {
			next = 0
			return false
		}
		if exp := k[len(sessionExpiryPrefix) : len(sessionExpiryPrefix)+16]; exp > due {
			next = parseHex16(exp)
			return false
		}
		expired = append(expired, k[len(sessionExpiryPrefix)+17:])
		return true
	})
	f.sessNextExpiry = next
	for _, k := range expired {
		f.dropSession(k)
	}
}

// recountSessions derives the session byte count from the state (after a
// restore): the same sum every replica keeps up to date as it applies.
func (f *FSM) recountSessions() {
	f.sessBytes, f.sessNextExpiry, f.sessTenantBytes = 0, 0, nil
	f.st.Scan(sessionPrefix, "", func(k string, v []byte) bool {
		var rec sessionRecord
		if decode(v, &rec) == nil {
			f.sessBytes += sessionRecordBytes + rec.Bytes
			f.addTenantSessionBytes(sessionKeyOwner(k), sessionRecordBytes+rec.Bytes)
		}
		return true
	})
}

// SessionStats is what the sessions hold, for metrics and /v1/cluster.
type SessionStats struct {
	Bytes int64 // counted against Limits.SessionBytes
}
