package fsm

import "testing"

// The state machine's own tests are single-goroutine loops over random
// inputs, and the race detector slows them ten to twenty times (the
// package took 119 s under -race, 12 s without). `make test` therefore
// runs this package twice: under -race with the rest of the tree, where
// the long loops run a tenth of their rounds and the heap measurements
// are skipped, and without -race (the unit target's second line), where
// every test runs in full.

// rounds is n without the race detector and a tenth of n (at least 1)
// with it.
func rounds(n int) int {
	if raceEnabled {
		return max(n/10, 1)
	}
	return n
}

// skipUnderRace skips a test that measures the heap or walks tens of
// thousands of records: under -race the detector's shadow memory and
// slowdown make it both wrong and slow. The run without -race runs it.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("under -race: this test runs in make test's run without -race (go test ./fsm/)")
	}
}
