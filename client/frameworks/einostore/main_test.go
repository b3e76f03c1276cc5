package einostore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/frameworks/internal/batontest"
)

// maxCheckpointBytes is the cluster's --max-checkpoint-bytes in these
// tests: small, so that the test of the bound uploads little.
const maxCheckpointBytes = 2 << 20

var (
	testCluster *batontest.Cluster
	admin       *client.Client
)

// TestMain runs a phase of TestResumeInAnotherProcess when the test binary
// is re-executed as one (phaseEnv set); otherwise it starts a three-node
// cluster of batond for the package's tests.
func TestMain(m *testing.M) {
	if phase := os.Getenv(phaseEnv); phase != "" {
		os.Exit(runPhase(phase))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	c, err := batontest.Start(ctx, fmt.Sprintf("--max-checkpoint-bytes=%d", maxCheckpointBytes))
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "einostore tests: starting batond:", err)
		os.Exit(1)
	}
	testCluster = c
	if admin, err = c.Client(); err != nil {
		c.Close()
		fmt.Fprintln(os.Stderr, "einostore tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	c.Close()
	os.Exit(code)
}
