package server

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"

	"github.com/baton-dev/baton/fsm"
)

const headerIdempotencyKey = "Idempotency-Key"

// readJSON reads the body (bounded by MaxJSONBody) and decodes it strictly
// into v. It returns the raw bytes for the idempotency fingerprint.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	b, err := readBody(w, r, s.cfg.MaxJSONBody)
	if err != nil {
		return nil, err
	}
	if fd, ok := v.(fastDecoder); ok && fd.decodeFast(b) {
		return b, nil
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

// propose builds the command for a write, stamps the leader's time and the
// caller, and waits until it is applied.
func (s *Server) propose(r *http.Request, id *identity, tenant string, kind fsm.Kind, args any, body []byte) (*fsm.Result, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return nil, err
	}
	cmd := fsm.NewCommand(kind, s.now(), tenant, id.principalName(), args)
	if key != "" {
		cmd.IdemKey, cmd.IdemFP, cmd.IdemTTL = key, fingerprint(r, body), s.cfg.IdempotencyTTL.Milliseconds()
	}
	res, err := s.cluster.Apply(r.Context(), cmd)
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
