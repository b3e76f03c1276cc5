package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// batond is the real server binary, built once by TestMain; batondErr says
// why it could not be built.
var (
	batond    string
	batondErr error
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "1" {
		os.Exit(runFakeBatond(os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "cluster-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flag.Parse()
	if !testing.Short() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		batond, batondErr = BuildBatond(ctx, dir)
		cancel()
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// needBatond returns the real batond binary, failing the test when it could
// not be built. With -short the tests of real processes are skipped.
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
