package workload

import (
	"errors"
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
	if err != nil || req.Method == http.MethodGet || !l.drop() {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	l.lost.Add(1)
	return nil, errResponseLost
}

func (l *lossy) drop() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.Float64() < l.p
}
