package runner

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/baton-dev/baton/cmd/batond/cluster"
	"go.uber.org/goleak"
)

// batond is the server binary, built once by TestMain; batondErr says why
// it could not be built.
var (
	batond    string
	batondErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "chaos-runner-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if !testing.Short() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		batond, batondErr = cluster.BuildBatond(ctx, dir)
		cancel()
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// needBatond returns the real batond binary; with -short the tests of real
// processes are skipped.
func needBatond(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no real batond processes")
	}
	if batondErr != nil {
		t.Fatalf("batond did not build: %v", batondErr)
	}
	return batond
}
