package concurrency_test

import (
	"testing"

	"github.com/baton-dev/baton/client/internal/clustertest"
)

// env is the package's real batond processes (TestMain).
var env *clustertest.Env

// TestMain builds batond from this tree and starts the package's shared
// nodes (clustertest.Main): a one-node cluster, which the node tests and
// the runnable examples find as a user would (BATON_ENDPOINTS and
// BATON_TOKEN, with the tenant "acme" created), and a node without a
// leader, for real 503s. After the run it fails the package when a
// goroutine its tests started outlives them.
func TestMain(m *testing.M) {
	clustertest.Main(m, clustertest.Options{Prefix: "baton-concurrency-tests-", Leaderless: true,
		Ready: func(e *clustertest.Env) { env = e }})
}
