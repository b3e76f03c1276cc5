package server

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/replica"
)

// Headers of idempotent retries: an explicit key, or a write's place in a
// client session (fsm/sessions.go): the session id, the write's number,
// and the lowest number the client still waits for.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerSession        = "X-Baton-Session"
	headerSessionSeq     = "X-Baton-Seq"
	headerSessionAck     = "X-Baton-Ack"
)

// readJSON reads the body (bounded by MaxJSONBody) and decodes it strictly
// into v. It returns the raw bytes for the idempotency fingerprint.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	b, err := readBody(w, r, s.cfg.MaxJSONBody, s.cfg.BodyTimeout)
	if err != nil {
		return nil, err
	}
	return b, decodeStrict(b, v)
}

// idempotencyKey validates the Idempotency-Key header: 1-128 printable chars.
func idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get(headerIdempotencyKey)
	if k == "" {
		return "", nil
	}
	if len(k) > 128 {
		return "", badRequest("Idempotency-Key is over 128 characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", badRequest("Idempotency-Key must be printable ASCII")
		}
	}
	return k, nil
}

// fingerprint identifies a request for idempotency: method, path, query, body.
func fingerprint(r *http.Request, body []byte) []byte {
	h := sha256.New()
	for _, part := range []string{r.Method, r.URL.Path, r.URL.RawQuery} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(body)
	return h.Sum(nil)
}

// sessionPlace reads a write's place in a client session from its
// headers: all three or none.
func sessionPlace(r *http.Request) (id, seq, ack uint64, err error) {
	hs, hq, ha := r.Header.Get(headerSession), r.Header.Get(headerSessionSeq), r.Header.Get(headerSessionAck)
	if hs == "" && hq == "" && ha == "" {
		return 0, 0, 0, nil
	}
	parse := func(name, v string, min uint64) (uint64, error) {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n < min {
			return 0, badRequest("%s must be a whole number of at least %d, got %q", name, min, v)
		}
		return n, nil
	}
	if id, err = parse(headerSession, hs, 1); err != nil {
		return
	}
	if seq, err = parse(headerSessionSeq, hq, 1); err != nil {
		return
	}
	if ack, err = parse(headerSessionAck, ha, 0); err != nil {
		return
	}
	if ack > seq {
		return 0, 0, 0, badRequest("%s %d is above %s %d", headerSessionAck, ack, headerSessionSeq, seq)
	}
	return id, seq, ack, nil
}

// caller decodes who writes from the request: the tenant, the caller, and
// what identifies its retries (an Idempotency-Key, which wins, or its place
// in a client session) with the request's fingerprint.
func caller(r *http.Request, id *identity, tenant string, body []byte) (replica.Caller, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return replica.Caller{}, err
	}
	sid, seq, ack, err := sessionPlace(r)
	if err != nil {
		return replica.Caller{}, err
	}
	c := replica.Caller{Tenant: tenant, Principal: id.principalName(), IdemKey: key, Session: sid, Seq: seq, Ack: ack}
	if key != "" || sid != 0 {
		c.Fingerprint = fingerprint(r, body)
	}
	return c, nil
}

// command builds the command for a write (replica.Replica.Command).
func (s *Server) command(r *http.Request, id *identity, tenant string, kind fsm.Kind, args any, body []byte) (*fsm.Command, error) {
	c, err := caller(r, id, tenant, body)
	if err != nil {
		return nil, err
	}
	return s.replica.Command(c, kind, args), nil
}

// propose builds the command for a write and waits until it is applied.
func (s *Server) propose(r *http.Request, id *identity, tenant string, kind fsm.Kind, args any, body []byte) (*fsm.Result, error) {
	cmd, err := s.command(r, id, tenant, kind, args, body)
	if err != nil {
		return nil, err
	}
	return s.apply(r, cmd)
}

// apply proposes cmd and waits until it is applied.
func (s *Server) apply(r *http.Request, cmd *fsm.Command) (*fsm.Result, error) {
	res, err := s.replica.Propose(r.Context(), cmd)
	if err != nil {
		return nil, unavailable(err)
	}
	return res, nil
}

// reply writes a command's result. render, if given, rewrites a successful
// value (for example to add a derived field).
func reply(w http.ResponseWriter, res *fsm.Result, render func(json.RawMessage) (any, error)) error {
	setIndex(w, res.Index)
	if res.Replay {
		w.Header().Set("Idempotent-Replay", "true")
	}
	if !res.OK() {
		retryAfterFlow(w, res)
		writeError(w, resultError(res))
		return nil
	}
	status := map[fsm.Outcome]int{fsm.OutcomeOK: 200, fsm.OutcomeCreated: 201, fsm.OutcomeNoContent: 204}[res.Outcome]
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return nil
	}
	if render == nil {
		writeRawJSON(w, status, res.JSON())
		return nil
	}
	v, err := render(res.JSON())
	if err != nil {
		return err
	}
	writeJSON(w, status, v)
	return nil
}

// readReply writes the answer of a read with the index of the state it saw.
func (s *Server) readReply(w http.ResponseWriter, index uint64, v any) error {
	setIndex(w, index)
	writeJSON(w, http.StatusOK, v)
	return nil
}
