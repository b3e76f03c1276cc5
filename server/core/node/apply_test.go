package node

import (
	"bytes"
	"testing"

	"github.com/baton-dev/baton/fsm"
)

func bigProposal(size int) *proposal {
	return &proposal{cmd: &fsm.Command{Kind: fsm.KindKVPut, Tenant: "t", Args: bytes.Repeat([]byte{'x'}, size)}}
}

// An entry closes at fsm.MaxCommandsPerEntry commands or maxEntryBytes,
// whichever comes first; a command larger than the budget still gets an
// entry of its own.
func TestEntryBatchBounds(t *testing.T) {
	var b entryBatch
	small := bigProposal(10)
	for i := 0; i < fsm.MaxCommandsPerEntry; i++ {
		if b.full() || !b.fits(small) {
			t.Fatalf("entry closed after %d small commands", i)
		}
		b.add(small)
	}
	if !b.full() || b.fits(small) {
		t.Fatalf("entry still open after %d commands", fsm.MaxCommandsPerEntry)
	}

	b.reset()
	quarter := bigProposal(maxEntryBytes / 4)
	added := 0
	for b.fits(quarter) {
		b.add(quarter)
		added++
	}
	if added != 3 || b.bytes > maxEntryBytes {
		t.Fatalf("took %d quarter-budget commands (%d bytes), want 3 within %d", added, b.bytes, maxEntryBytes)
	}

	b.reset()
	huge := bigProposal(2 * maxEntryBytes)
	b.add(huge) // the first command of an entry is always taken
	if !b.full() || b.fits(small) {
		t.Fatal("an entry over the budget takes more commands")
	}
	b.reset()
	if len(b.props) != 0 || b.bytes != 0 || b.full() {
		t.Fatalf("reset left %d commands, %d bytes", len(b.props), b.bytes)
	}
}
