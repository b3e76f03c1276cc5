package client

import (
	"testing"

	"github.com/baton-dev/baton/fsm/wire"
)

// Every code the server may answer with (wire.Status, the server's own
// table) has a sentinel whose text is the code, and a response carrying
// that code matches it.
func TestEverySentinelOfTheWire(t *testing.T) {
	for code, status := range wire.Status {
		sentinel, ok := sentinels[code]
		if !ok {
			t.Errorf("code %q (status %d) has no sentinel", code, status)
			continue
		}
		if sentinel.Error() != code {
			t.Errorf("the sentinel of %q reads %q", code, sentinel.Error())
		}
	}
	for code := range sentinels {
		if _, ok := wire.Status[code]; !ok {
			t.Errorf("sentinel for %q, which is no code of the wire", code)
		}
	}
}
