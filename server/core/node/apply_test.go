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

// Group commit: a proposal arriving with an entry slot free is handed back
// to its caller to drive alone; once every slot is taken, proposals gather,
// and a finished entry hands its slot to the gathered ones (at most one
// entry's worth at a time) before giving it back.
func TestGroupCommitSlots(t *testing.T) {
	var g groupCommit
	small := func() *proposal { return bigProposal(10) }
	a, b := small(), small()
	if got := g.enqueue(a, 2); len(got) != 1 || got[0] != a {
		t.Fatalf("first proposal on an idle node: driven batch %v, want just itself", got)
	}
	if got := g.enqueue(b, 2); len(got) != 1 || got[0] != b {
		t.Fatalf("second proposal with a slot free: driven batch %v, want just itself", got)
	}
	waiting := make([]*proposal, fsm.MaxCommandsPerEntry+5)
	for i := range waiting {
		waiting[i] = small()
		if got := g.enqueue(waiting[i], 2); got != nil {
			t.Fatalf("proposal %d with every slot taken was handed an entry of %d", i, len(got))
		}
	}
	next := g.finished()
	if len(next) != fsm.MaxCommandsPerEntry || next[0] != waiting[0] {
		t.Fatalf("finished entry handed on %d proposals, want the first %d in order", len(next), fsm.MaxCommandsPerEntry)
	}
	if last := g.finished(); len(last) != 5 || last[0] != waiting[fsm.MaxCommandsPerEntry] {
		t.Fatalf("second finished entry handed on %d proposals, want the 5 left", len(last))
	}
	for i := 0; i < 2; i++ {
		if got := g.finished(); got != nil {
			t.Fatalf("nothing queued, yet finished handed on %d proposals", len(got))
		}
	}
	if g.inflight != 0 || len(g.queue) != 0 {
		t.Fatalf("after all four entries finished: %d in flight, %d queued; want none", g.inflight, len(g.queue))
	}
	if got := g.enqueue(a, 2); len(got) != 1 {
		t.Fatalf("slots given back, yet a new proposal was not handed an entry (%d)", len(got))
	}
}
