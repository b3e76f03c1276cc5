package concurrency_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/internal/clustertest"
	"github.com/google/uuid"
)

var bg = context.Background()

// The helpers are clustertest's, shared with the client package's tests.

func newClientCfg(t *testing.T, cfg client.Config) *client.Client {
	return clustertest.NewClient(t, cfg)
}

// newClient is a client of endpoints with a short per-attempt timeout and
// retry budget.
func newClient(t *testing.T, endpoints ...string) *client.Client {
	return newClientCfg(t, client.Config{Endpoints: endpoints, Token: "tok", Timeout: 2 * time.Second, MaxRetry: 5 * time.Second})
}

// uniqueName is prefix made unique per run: -count=N shares the node,
// which keeps what earlier runs created.
func uniqueName(prefix string) string { return prefix + "-" + uuid.NewString()[:13] }

func ctxTimeout(t *testing.T, d time.Duration) context.Context { return clustertest.CtxTimeout(t, d) }
