package client

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// RequestOption adjusts one call. Every method accepts them last.
type RequestOption func(*requestOptions)

type requestOptions struct {
	stale          bool
	idempotencyKey string
	endpoint       string
	meta           *Meta
	extraTimeout   time.Duration
}

// Stale lets a read be answered from the local state of whichever node
// receives it (?consistency=stale), without a round trip to the leader.
func Stale() RequestOption {
	return func(o *requestOptions) { o.stale = true }
}

// NewIdempotencyKey returns a new key for IdempotencyKey or
// WithIdempotencyKey: a UUIDv7 (RFC 9562), which carries its creation
// time, so that the cluster can refuse a retry of it with
// ErrIdempotencyExpired once its answer is no longer kept, instead of
// applying it again. Store it with the operation it identifies.
func NewIdempotencyKey() string {
	return uuid.Must(uuid.NewV7()).String()
}

// IdempotencyKey sets the Idempotency-Key of a write instead of a random
// one. The key must be 1-128 printable ASCII characters. It is ignored on
// reads.
func IdempotencyKey(key string) RequestOption {
	return func(o *requestOptions) { o.idempotencyKey = key }
}

// At sends the call to endpoint only: one attempt, no failover, no retry.
// endpoint need not be one of Config.Endpoints.
func At(endpoint string) RequestOption {
	return func(o *requestOptions) { o.endpoint = endpoint }
}

// CaptureMeta stores the response metadata of the call in m, also when the
// call fails with an error response.
func CaptureMeta(m *Meta) RequestOption {
	return func(o *requestOptions) { o.meta = m }
}

// extendTimeout lengthens the per-attempt timeout, for requests the server
// may legitimately hold (a queue claim with wait_ms).
func extendTimeout(d time.Duration) RequestOption {
	return func(o *requestOptions) { o.extraTimeout += d }
}

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns a context whose writes use key as their
// Idempotency-Key. An IdempotencyKey option on the call takes precedence.
// An empty key hides one attached further up: the writes get their own
// session places or keys again (client/concurrency does so for its own
// claims and renewals, which must never replay one another).
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

func collectOptions(ctx context.Context, opts []RequestOption) requestOptions {
	var o requestOptions
	if key, ok := ctx.Value(idempotencyKeyCtx{}).(string); ok {
		o.idempotencyKey = key
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
