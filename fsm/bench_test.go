package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
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
	h := newHistory(DefaultWatchHistoryBytes)
	ev := []Event{{Resource: ResourceTasks, Key: "task-00000007", Type: EventPut, Tenant: "b", Name: "q"}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ev[0].Index = uint64(i + 1)
		h.append(ev)
	}
}

// BenchmarkCodecs compares the hand-written codec (fsm/mpcodec.go) with
// go-msgpack's reflection codec it replaces, on one cas workload command
// (encoded by the leader, decoded by every replica), its task record
// (decoded and encoded again by every replica) and the idempotency record
// of its answer (encoded by every replica; decoded on a retry).
func BenchmarkCodecs(b *testing.B) {
	var tok uint64 = 7 << 16
	c := NewCommand(KindTaskUpdate, 1_700_000_000_000, "bench", "bench", &TaskUpdateArgs{ID: "cas64-17",
		FencingToken: &tok, Result: []byte(`{"n":12345}`)})
	c.IdemKey, c.IdemFP, c.IdemTTL = "0123456789abcdef0123456789abcdef", make([]byte, 32), DefaultIdempotencyTTL
	cmds := []*Command{c}
	entry := EncodeEntry(cmds)
	t := &Task{Tenant: "bench", ID: "cas64-17", Queue: "cas", Status: "running", Owner: "client-17",
		LeaseUntil: 1_700_003_600_000, FencingToken: tok, Version: 1234, Attempt: 1, Payload: []byte(`{}`),
		Result: []byte(`{"n":12345}`), CreatedAt: 1_700_000_000_000, UpdatedAt: 1_700_000_000_000, Seq: 5 << 16}
	record := encode(t)
	rec := &idemRecord{FP: make([]byte, 32), Expires: 1_700_086_400_000, Result: Result{Outcome: OutcomeOK,
		Value: mustJSON(t), Index: 12345}}
	recRaw := encode(rec)
	reflectEncode := func(v any) []byte {
		pe := encoders.Get().(*pooledEncoder)
		pe.buf = pe.buf[:0]
		pe.enc.ResetBytes(&pe.buf)
		if err := pe.enc.Encode(v); err != nil {
			b.Fatal(err)
		}
		out := append([]byte(nil), pe.buf...)
		encoders.Put(pe)
		return out
	}
	reflectDecode := func(raw []byte, v any) {
		d := decoders.Get().(*codec.Decoder)
		d.ResetBytes(raw)
		if err := d.Decode(v); err != nil {
			b.Fatal(err)
		}
		decoders.Put(d)
	}
	for _, bc := range []struct {
		name string
		f    func()
	}{
		{"entry-encode/fast", func() { EncodeEntry(cmds) }},
		{"entry-encode/reflect", func() { _ = append([]byte{EntryVersion}, reflectEncode(cmds)...) }},
		{"entry-decode/fast", func() {
			if _, err := decodeCommands(entry[1:], MaxCommandsPerEntry); err != nil {
				b.Fatal(err)
			}
		}},
		{"entry-decode/reflect", func() {
			var out []*Command
			reflectDecode(entry[1:], &out)
		}},
		{"task-decode-encode/fast", func() {
			var x Task
			if err := decodeTask(record, &x); err != nil {
				b.Fatal(err)
			}
			encode(&x)
		}},
		{"task-decode-encode/reflect", func() {
			var x Task
			reflectDecode(record, &x)
			reflectEncode(&x)
		}},
		{"idem-record-encode/fast", func() { encode(rec) }},
		{"idem-record-encode/reflect", func() { reflectEncode(rec) }},
		{"idem-record-decode/fast", func() {
			var x idemRecord
			if err := decodeIdemRecord(recRaw, &x); err != nil {
				b.Fatal(err)
			}
		}},
		{"idem-record-decode/reflect", func() {
			var x idemRecord
			reflectDecode(recRaw, &x)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				bc.f()
			}
		})
	}
}
