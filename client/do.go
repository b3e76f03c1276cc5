package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Meta is the metadata of a response.
type Meta struct {
	Index  uint64 // X-Baton-Index: the Raft index the answer reflects
	Replay bool   // Idempotent-Replay: the answer to an earlier request with the same key
	Status int    // HTTP status
	// Position is Index in the unit of fencing tokens and KV versions
	// (X-Baton-Position: Index<<16 | 0xFFFF): a token or version the
	// answer's state holds is at most Position, one issued later is
	// above it. Compare tokens and versions with it, not with Index.
	Position uint64
}

// Do sends one logical request, with failover and retries as described in
// the package documentation, and decodes a successful response into out.
//
// path is the request path with its query, e.g. "/v1/tenants". body is
// encoded as JSON, except []byte, which is sent as application/octet-stream
// (json.RawMessage is sent as JSON). out may be nil (the body is discarded)
// or *[]byte (the raw body); otherwise the body is decoded as JSON. A 204
// leaves out untouched. An error response returns an *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any, opts ...RequestOption) (Meta, error) {
	o := collectOptions(ctx, opts)
	cl, err := c.newCall(method, path, body, o)
	if err != nil {
		return Meta{}, err
	}
	_, raw := out.(*[]byte)
	cl.wantValue = out != nil && !raw
	send := func() result {
		if o.endpoint != "" {
			return c.pinned(ctx, o.endpoint, cl)
		}
		return c.failover(ctx, cl)
	}
	var res result
	if isWrite(method) && cl.key == "" {
		res, err = c.sendInSession(ctx, cl, send)
		if err != nil {
			return Meta{}, err
		}
	} else {
		res = send()
	}
	if o.meta != nil {
		*o.meta = res.meta
	}
	if res.err != nil {
		return res.meta, res.err
	}
	return res.meta, decodeBody(res, out)
}

// call is one logical request, shared by all of its attempts.
type call struct {
	method      string
	path        string
	body        []byte
	contentType string
	key         string // Idempotency-Key, for writes
	place       place  // the write's place in the client's session
	attempts    int    // attempts made so far
	timeout     time.Duration
	// wantValue: the answer is a JSON value, so a 200 or 201 without a
	// body is a broken answer, tried again (see attempt).
	wantValue bool
}

func (c *Client) newCall(method, path string, body any, o requestOptions) (*call, error) {
	data, ctype, err := encodeBody(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s request: %w", method, path, err)
	}
	cl := &call{method: method, path: path, body: data, contentType: ctype,
		timeout: c.timeout + o.extraTimeout}
	if o.stale {
		cl.path = addQuery(path, "consistency=stale")
	}
	if isWrite(method) && o.idempotencyKey != "" {
		if cl.key, err = idempotencyKey(o.idempotencyKey); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

// sendInSession sends a write in the client's session (session.go), or
// with a random Idempotency-Key when the server has no sessions. A write
// whose first attempt was refused because the session is gone applied
// nothing: it goes again in a new session, once; likewise a first attempt
// refused for its number goes again with a new one.
func (c *Client) sendInSession(ctx context.Context, cl *call, send func() result) (result, error) {
	for round := 0; ; round++ {
		p, ok, err := c.beginWrite(ctx)
		if err != nil {
			return result{}, err
		}
		if !ok {
			cl.key = NewIdempotencyKey()
			return send(), nil
		}
		cl.place, cl.attempts = p, 0
		res := send()
		c.endWrite(p)
		if refused, gone := refusedUnapplied(res.err); refused && round == 0 && cl.attempts == 1 {
			if gone {
				c.dropSession(p.id)
			}
			continue
		}
		return res, nil
	}
}

func encodeBody(body any) ([]byte, string, error) {
	switch b := body.(type) {
	case nil:
		return nil, "", nil
	case json.RawMessage:
		return b, "application/json", nil
	case []byte:
		return b, "application/octet-stream", nil
	}
	data, err := json.Marshal(body)
	return data, "application/json", err
}

func decodeBody(res result, out any) error {
	if out == nil || res.meta.Status == http.StatusNoContent || len(res.body) == 0 {
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = res.body
		return nil
	}
	// A task, the answer to most calls, decodes the body with
	// json.Unmarshal itself (Task.UnmarshalJSON), which checks the whole
	// body before decoding it: json.Unmarshal(body, out) would check it
	// once more first. Only the SDK's own type: a caller's Unmarshaler,
	// given to Do, gets what json.Unmarshal gives it.
	var err error
	if t, ok := out.(*Task); ok && t != nil {
		err = t.UnmarshalJSON(res.body)
	} else {
		err = json.Unmarshal(res.body, out)
	}
	if err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch:
		return true
	}
	return false
}

func addQuery(path, kv string) string {
	if strings.Contains(path, "?") {
		return path + "&" + kv
	}
	return path + "?" + kv
}

// idempotencyKey validates a caller's key or makes a random 128-bit one.
func idempotencyKey(given string) (string, error) {
	if given == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		return hex.EncodeToString(b[:]), nil
	}
	if len(given) > 128 {
		return "", fmt.Errorf("%w: idempotency key longer than 128 characters", ErrInvalidArgument)
	}
	for _, r := range given {
		if r < 0x21 || r > 0x7e {
			return "", fmt.Errorf("%w: idempotency key must be printable ASCII", ErrInvalidArgument)
		}
	}
	return given, nil
}
