package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// loadQueue fills one queue of tenant "b" with n pending tasks, 256 per
// log entry, and returns the next free log index.
func loadQueue(tb testing.TB, f *FSM, n int) uint64 {
	tb.Helper()
	index := uint64(1)
	apply := func(cmds []*Command) {
		out := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: EncodeEntry(cmds)})
		for _, r := range out.([]*Result) {
			if !r.OK() {
				tb.Fatalf("load: %s %s", r.Code, r.Message)
			}
		}
		index++
	}
	apply([]*Command{NewCommand(KindTenantPut, 1, "b", "", &TenantPutArgs{Name: "b"})})
	batch := make([]*Command, 0, MaxCommandsPerEntry)
	for i := 0; i < n; i++ {
		batch = append(batch, NewCommand(KindTaskCreate, 1, "b", "", &TaskCreateArgs{
			ID: fmt.Sprintf("task-%08d", i), Queue: "q", Priority: int64(i % 8)}))
		if len(batch) == cap(batch) {
			apply(batch)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		apply(batch)
	}
	return index
}

// BenchmarkQueueClaim measures one queue claim (one log entry applied) in a
// queue of N pending tasks. The time per claim must not grow with N.
func BenchmarkQueueClaim(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			f := New()
			index := loadQueue(b, f, n)
			args := &QueueClaimArgs{Queue: "q", Owner: "w", LeaseMs: 60_000, Statuses: []string{"pending"}}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 && i%n == 0 { // queue drained: refilling is not what we measure
					b.StopTimer()
					f = New()
					index = loadQueue(b, f, n)
					b.StartTimer()
				}
				cmd := NewCommand(KindTaskQueueClaim, 2, "b", "", args)
				out := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: EncodeEntry([]*Command{cmd})})
				index++
				if r := out.([]*Result)[0]; !r.OK() || r.Outcome == OutcomeNoContent {
					b.Fatalf("claim %d: %q %s", i, r.Code, r.Message)
				}
			}
		})
	}
}

// BenchmarkFencedUpdate measures what a replica does for one fenced task
// update with an Idempotency-Key (the cas workload): decode the entry,
// apply, remember the answer; plus the leader's JSON of the answer.
func BenchmarkFencedUpdate(b *testing.B) {
	f := New()
	index := loadQueue(b, f, 64)
	apply := func(c *Command) *Result {
		out := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: EncodeEntry([]*Command{c})})
		index++
		r := out.([]*Result)[0]
		if !r.OK() {
			b.Fatalf("%s %s", r.Code, r.Message)
		}
		return r
	}
	claimed := apply(NewCommand(KindTaskClaim, 2, "b", "", &TaskClaimArgs{ID: "task-00000007", Owner: "w", LeaseMs: 3_600_000}))
	var tok uint64
	if t, ok := claimed.Obj.(*Task); ok {
		tok = t.FencingToken
	} else {
		b.Fatalf("claim answered %T", claimed.Obj)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := NewCommand(KindTaskUpdate, 3, "b", "", &TaskUpdateArgs{ID: "task-00000007", FencingToken: &tok,
			Payload: []byte(fmt.Sprintf(`{"step":%d,"note":"a fenced update"}`, i))})
		c.IdemKey, c.IdemFP = fmt.Sprintf("%032x", i), []byte("fingerprint-of-the-request-body!!")
		apply(c).JSON()
	}
}

// BenchmarkHistoryAppend is the watch history's share of every applied
// entry: one event appended, at the default limit (run it with
// -benchtime=1000000x or more to pass the limit several times).
func BenchmarkHistoryAppend(b *testing.B) {
	h := newHistory(DefaultWatchHistory)
	ev := []Event{{Resource: ResourceTasks, Key: "task-00000007", Type: EventPut, Tenant: "b", Name: "q"}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ev[0].Index = uint64(i + 1)
		h.append(ev)
	}
}
