package fsm

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// TestWatchHistoryBoundedByBytes: a tenant writing large KV values (900 KB
// each, over and over to one key, so the state itself stays one value)
// must not grow the node's memory through the watch history: the history
// keeps about DefaultWatchHistoryBytes of events, not a count of them.
// (With a history bounded by a count of 100,000 events, 200 such writes
// held about 180 MB.)
func TestWatchHistoryBoundedByBytes(t *testing.T) {
	skipUnderRace(t)
	f := New()
	applyOne(t, f, 1, tenantPut(1, "big"))
	value := append(append([]byte(`"`), bytes.Repeat([]byte("x"), 900_000)...), '"')
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// 80 puts hold 72 MB, over twice the 32 MiB default budget: without
	// the bound the heap would grow past the 48 MB allowed below.
	const writes = 80
	for i := 0; i < writes; i++ {
		c := NewCommand(KindKVPut, int64(2+i), "big", "", &KVPutArgs{Namespace: "ns", Key: "k", Value: value})
		if r := applyOne(t, f, uint64(2+i), c); !r.OK() {
			t.Fatalf("put %d: %s", i, describe(r))
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	used, limit := f.History().Bytes()
	t.Logf("%d puts of %d bytes: heap grew %d MB; history holds %d MB of %d MB", writes, len(value), grew>>20, used>>20, limit>>20)
	if used > limit {
		t.Errorf("history holds %d bytes, over its limit %d", used, limit)
	}
	// The history's budget, the one value in the state, the last command's
	// bytes, and slack for the runtime.
	if max := DefaultWatchHistoryBytes + 16<<20; grew > max {
		t.Errorf("heap grew by %d MB, want at most %d MB", grew>>20, max>>20)
	}
	// The oldest events are gone, the newest are kept.
	floor := f.History().Floor()
	if floor < 10 {
		t.Errorf("floor %d: nothing was evicted", floor)
	}
	if _, compacted := f.History().Since(floor-1, -1, 1); !compacted {
		t.Errorf("resuming before the floor %d is not compacted", floor)
	}
	evs, compacted := f.History().Since(floor, -1, 1000)
	if compacted || len(evs) == 0 || evs[len(evs)-1].Index != writes+1 {
		t.Errorf("from the floor: %d events, compacted %v", len(evs), compacted)
	}
}

// TestWatchHistoryKeepsNewestIndex: an entry whose events alone are over
// the limit is kept whole (a watcher can always resume from the newest
// index), and older entries go.
func TestWatchHistoryKeepsNewestIndex(t *testing.T) {
	h := newHistory(1 << 20)
	small := func(index uint64) []Event {
		return []Event{{Index: index, Key: fmt.Sprint(index)}}
	}
	for i := uint64(1); i <= 10; i++ {
		h.append(small(i))
	}
	big := make([]Event, 0, 3)
	for p := 0; p < 3; p++ {
		big = append(big, Event{Index: 11, Pos: p, Value: &Payload{obj: &KVEntry{Value: make([]byte, 400<<10)}}})
	}
	h.append(big)
	evs, compacted := h.Since(10, -1, 100)
	if compacted || len(evs) != 3 {
		t.Fatalf("after the big entry: %d events from index 10, compacted %v; want its 3", len(evs), compacted)
	}
	if h.Floor() != 10 {
		t.Errorf("floor %d, want 10 (every older index evicted)", h.Floor())
	}
}

// TestValueBytesCoversEveryEvent: the watch history's byte bound holds
// only if valueBytes measures every kind of object the state machine puts
// in it; a kind it does not know gets a flat 1 KiB guess, so a waitpoint
// with a 1 MiB payload counted as 1 KiB (the history could then hold a
// thousand times its --watch-history-bytes). The random logs of the
// determinism tests make every kind of event; each one's object must be
// of a measured type, and every type that emit is given must be seen.
func TestValueBytesCoversEveryEvent(t *testing.T) {
	seen := map[string]int{}
	for seed := range uint64(5) {
		f := New()
		for _, l := range randomLog(seed, 300) {
			f.Apply(l)
		}
		evs, compacted := f.History().Since(0, -1, 1<<30)
		if compacted {
			t.Fatal("history compacted within 300 entries")
		}
		for _, e := range evs {
			if e.Value == nil {
				continue
			}
			typ := fmt.Sprintf("%T", e.Value.obj)
			seen[typ]++
			if _, ok := valueBytesOf(e.Value.obj); !ok {
				t.Errorf("a %s event of %s: valueBytes does not measure it", typ, e.Resource)
			}
		}
	}
	t.Logf("event objects: %v", seen)
	for _, want := range []string{"*fsm.Task", "*fsm.KVEntry", "fsm.CheckpointView", "fsm.taskWritesView",
		"*fsm.Op", "*fsm.Ref", "*fsm.Manifest", "*fsm.Waitpoint"} {
		if seen[want] == 0 {
			t.Errorf("no %s event in the random logs", want)
		}
	}
}

// TestValueBytesCountsLargeFields: the fields that make an object large
// are counted, a waitpoint's payload and a checkpoint's chunk list among
// them.
func TestValueBytesCountsLargeFields(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 1<<20)
	if n := valueBytes(&Waitpoint{ID: "w", Payload: payload}); n < len(payload) {
		t.Errorf("a waitpoint with a %d-byte payload counts %d bytes", len(payload), n)
	}
	chunks := make([]ChunkRef, 10_000)
	for i := range chunks {
		chunks[i] = ChunkRef{Digest: fmt.Sprintf("sha256:%064x", i), Size: 1}
	}
	if n := valueBytes(CheckpointView{Checkpoint: &Checkpoint{ID: "c", Chunks: chunks}}); n < len(chunks)*71 {
		t.Errorf("a checkpoint naming %d chunks counts %d bytes", len(chunks), n)
	}
	refs := make([]BlobRef, 10_000)
	for i := range refs {
		refs[i] = BlobRef{Channel: fmt.Sprintf("channel-%d", i), Version: fmt.Sprintf("%032d", i)}
	}
	if n := valueBytes(CheckpointView{Checkpoint: &Checkpoint{ID: "c", BlobRefs: refs}}); n < len(refs)*40 {
		t.Errorf("a checkpoint naming %d channel values counts %d bytes", len(refs), n)
	}
}
