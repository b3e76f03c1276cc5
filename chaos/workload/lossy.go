package workload

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
)

// errResponseLost is what a lossy transport returns in place of an answer.
var errResponseLost = errors.New("chaos: response lost on the way back")

// lossy is a client-side network fault: it passes every request on and,
// for a fraction of writes, throws the answer away and reports a broken
// connection instead. The write was applied; the client does not know it
// and retries with the same Idempotency-Key, which the server must answer
// with a replay of the first answer. This is the fault that exercises
// every write path's idempotency.
type lossy struct {
	base http.RoundTripper
	p    float64

	mu   sync.Mutex
	rng  *rand.Rand
	lost *atomic.Int64
}

func (l *lossy) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(req)
	if err != nil || req.Method == http.MethodGet {
		return resp, err
	}
	tr, _ := req.Context().Value(traceKey{}).(*answerTrace)
	id := retryIdentity(req)
	if !l.drop() {
		if tr != nil && id != "" && tr.lostID.Load() != nil && *tr.lostID.Load() == id { // the retry's answer, to compare
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr != nil {
				return nil, rerr // a failed read is a failed round trip, not a shorter answer
			}
			resp.Body = io.NopCloser(bytes.NewReader(body))
			tr.last.Store(answerDigest(resp.StatusCode, body))
		}
		return resp, err
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr != nil {
		return nil, rerr // not an answer to remember
	}
	l.lost.Add(1)
	if tr != nil && id != "" && resp.StatusCode < 300 && tr.lost.CompareAndSwap(nil, answerDigest(resp.StatusCode, body)) {
		tr.lostID.Store(&id)
	}
	return nil, errResponseLost
}

// retryIdentity is what makes a write's retries one write: its
// Idempotency-Key or its place in a client session ("" for neither, such
// as a session open).
func retryIdentity(req *http.Request) string {
	if k := req.Header.Get("Idempotency-Key"); k != "" {
		return "key " + k
	}
	if seq := req.Header.Get("X-Baton-Seq"); seq != "" {
		return "session " + req.Header.Get("X-Baton-Session") + "/" + seq
	}
	return ""
}

// answerTrace follows the answers of one operation's attempts through the
// lossy transport (carried in the request's context).
type answerTrace struct {
	lost   atomic.Pointer[string] // the first successful answer thrown away
	lostID atomic.Pointer[string] // the retry identity of its request
	last   atomic.Pointer[string] // the last answer passed on after that
}

type traceKey struct{}

func answerDigest(status int, body []byte) *string {
	h := sha256.Sum256(body)
	s := fmt.Sprintf("%d %x", status, h[:8])
	return &s
}

func (l *lossy) drop() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.Float64() < l.p
}
