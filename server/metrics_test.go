package server

import (
	"runtime"
	"testing"
)

// The live heap gauge reads the runtime's figure: after a collection it
// is at least what a live allocation holds.
func TestHeapLive(t *testing.T) {
	hold := make([]byte, 8<<20)
	runtime.GC()
	if got := heapLive(); got < float64(len(hold)) {
		t.Fatalf("heapLive() = %v with %d bytes held", got, len(hold))
	}
	runtime.KeepAlive(hold)
}
