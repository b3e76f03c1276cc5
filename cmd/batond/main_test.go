package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started
// outlives them: every background goroutine must stop on Close or with
// its context.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
