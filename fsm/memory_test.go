package fsm

import (
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// What a task costs in memory, measured in process. The scale benchmark
// (bench/baton/scale.go) loads tasks "s<i>" into queue "scale" of tenant
// "bench" with a 46-byte JSON payload, 128 task.create ops per
// transaction; memShape reproduces that and the other ways tasks arrive.
//
//	go test ./fsm/ -run TestTaskMemory -v -taskmem=1000000
//
// prints, per shape, the live heap per task after runtime.GC() and how it
// splits. Without -taskmem the report is skipped; TestTaskMemoryBound is
// the regression guard that always runs.
var taskMemN = flag.Int("taskmem", 0, "TestTaskMemory: tasks to load (0 skips the report)")

// scalePayload is the scale workload's payload (46 bytes).
var scalePayload = []byte(`{"prompt":"summarise the sources","sources":3}`)

type memShape struct {
	name string
	txn  bool // 128 creates per transaction command (the scale workload)
	idem bool // an Idempotency-Key per command (the SDK before sessions)
}

var memShapes = []memShape{
	{name: "txn128", txn: true},
	{name: "txn128+idem", txn: true, idem: true},
	{name: "create"},
	{name: "create+idem", idem: true},
}

// loadScaleTasks applies n task.create commands shaped as sh, as group
// commit would pack them, and returns the next free log index.
func loadScaleTasks(tb testing.TB, f *FSM, n int, sh memShape) uint64 {
	tb.Helper()
	const now = 1_700_000_000_000
	index := uint64(1)
	apply := func(cmds []*Command) {
		out := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: EncodeEntry(cmds)})
		res, ok := out.([]*Result)
		if !ok {
			tb.Fatalf("entry %d: %v", index, out)
		}
		for _, r := range res {
			if !r.OK() {
				tb.Fatalf("load: %s %s", r.Code, r.Message)
			}
		}
		index++
	}
	apply([]*Command{NewCommand(KindTenantPut, now, "bench", "", &TenantPutArgs{Name: "bench"})})
	create := func(i int) *TaskCreateArgs {
		return &TaskCreateArgs{ID: "s" + strconv.Itoa(i), Queue: "scale", Payload: scalePayload}
	}
	perEntry, perCmd := MaxCommandsPerEntry, 1
	if sh.txn {
		perEntry, perCmd = 8, MaxTxnOps // 8 loaders' transactions per entry
	}
	var batch []*Command
	for i := 0; i < n; {
		var c *Command
		if sh.txn {
			args := &TxnArgs{}
			for ; i < n && len(args.Ops) < perCmd; i++ {
				args.Ops = append(args.Ops, TxnOp{Kind: KindTaskCreate, Args: EncodeArgs(create(i))})
			}
			c = NewCommand(KindTxn, now, "bench", "loader", args)
		} else {
			c = NewCommand(KindTaskCreate, now, "bench", "loader", create(i))
			i++
		}
		if sh.idem {
			c.IdemKey = fmt.Sprintf("%032x", len(batch)+int(index)<<16)
			c.IdemFP = make([]byte, 32)
		}
		batch = append(batch, c)
		if len(batch) == perEntry {
			apply(batch)
			batch = nil
		}
	}
	if len(batch) > 0 {
		apply(batch)
	}
	return index
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// sizeClass rounds an allocation of n pointer-free bytes up to the Go
// runtime's size class (runtime/sizeclasses.go), which is what it costs;
// past 32 KiB, to pages.
func sizeClass(n int) int {
	if n == 0 {
		return 0
	}
	for _, c := range [...]int{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
		288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792,
		2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240,
		10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768} {
		if n <= c {
			return c
		}
	}
	return (n + 8191) &^ 8191
}

// memPart sums the keys and values (in their stored form, stored.go) of
// one kind of record, and what they take as allocated (a tree item's key
// and value are one allocation).
type memPart struct {
	name           string
	prefix         string
	n              int
	keyLen, valLen int
	alloc          int
}

type memReport struct {
	tasks   int
	heap    int64 // live heap the load added
	history int64 // of which the watch history (measured by emptying it)
	parts   []*memPart
	items   int // B-tree items
}

// measureTaskMemory loads n tasks shaped as sh into a fresh FSM and
// splits the live heap it added.
func measureTaskMemory(tb testing.TB, n int, sh memShape) memReport {
	tb.Helper()
	before := liveHeap()
	f := New()
	loadScaleTasks(tb, f, n, sh)
	loaded := liveHeap()
	rep := memReport{tasks: n, heap: int64(loaded) - int64(before)}
	rep.parts = []*memPart{
		{name: "task records", prefix: taskPrefix("bench")},
		{name: "queue index", prefix: queuePrefix("bench", "scale", "")[:len("t/bench/q/")]},
		{name: "idempotency", prefix: hashedPrefix},
		{name: "idem expiry idx", prefix: idemExpiryPrefix},
		{name: "other", prefix: ""},
	}
	count := func(k string, v []byte, alloc int) { // v as the Store keeps it
		for _, p := range rep.parts {
			if strings.HasPrefix(k, p.prefix) {
				p.n++
				p.keyLen += len(k)
				p.valLen += len(v)
				p.alloc += alloc
				break
			}
		}
	}
	f.st.tree.Ascend(func(it item) bool {
		count(it.key(), it.stored(), sizeClass(int(it.klen+it.vlen)))
		return true
	})
	for _, sh := range f.st.hashed.shards {
		if sh != nil {
			for k, v := range sh.m {
				count(k, v, sizeClass(len(k))+sizeClass(cap(v)))
			}
		}
	}
	rep.items = f.st.tree.Len()
	f.history.reset(0)
	rep.history = int64(loaded) - int64(liveHeap())
	runtime.KeepAlive(f)
	return rep
}

func (r memReport) perTask(v int) float64 { return float64(v) / float64(r.tasks) }

// residual is what the keys, values and history do not account for: the
// B-tree's nodes (and the hash maps' buckets of idempotency records).
func (r memReport) residual() int64 {
	n := r.heap - r.history
	for _, p := range r.parts {
		n -= int64(p.alloc)
	}
	return n
}

func (r memReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d tasks: live heap %d B = %.1f B/task (%.1f B/task without the watch history)\n",
		r.tasks, r.heap, r.perTask(int(r.heap)), r.perTask(int(r.heap-r.history)))
	fmt.Fprintf(&b, "  %-18s %9s %12s %12s %18s\n", "part", "records", "key B/task", "value B/task", "allocated B/task")
	for _, p := range r.parts {
		if p.n == 0 {
			continue
		}
		fmt.Fprintf(&b, "  %-18s %9d %12.1f %12.1f %18.1f\n", p.name, p.n,
			r.perTask(p.keyLen), r.perTask(p.valLen), r.perTask(p.alloc))
	}
	fmt.Fprintf(&b, "  watch history      %.1f B/task (%d B)\n", r.perTask(int(r.history)), r.history)
	fmt.Fprintf(&b, "  B-tree nodes etc.  %.1f B/task (%d tree items, %.1f B/item)\n",
		r.perTask(int(r.residual())), r.items, float64(r.residual())/float64(r.items))
	return b.String()
}

// TestTaskMemory reports the memory per task of every shape at -taskmem
// tasks.
func TestTaskMemory(t *testing.T) {
	if *taskMemN == 0 {
		t.Skip("run with -taskmem=N to measure")
	}
	for _, sh := range memShapes {
		t.Logf("%s: %s", sh.name, measureTaskMemory(t, *taskMemN, sh))
	}
}

// TestTaskMemoryBound is a regression guard: 100,000 tasks of the scale
// workload's shape hold at most maxBytesPerTask of live heap each, watch
// history aside (measured: 573 bytes before the B-tree's split change,
// the stored form and 16-byte items; 488 with the first, 312 with two,
// 253 with all three).
func TestTaskMemoryBound(t *testing.T) {
	skipUnderRace(t)
	const n, maxBytesPerTask = 100_000, 360
	rep := measureTaskMemory(t, n, memShapes[0])
	if got := rep.perTask(int(rep.heap - rep.history)); got > maxBytesPerTask {
		t.Fatalf("%.1f bytes of live heap per task, more than %d:\n%s", got, maxBytesPerTask, rep)
	}
}
