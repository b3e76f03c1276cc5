package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// reflectEncode and reflectDecode are the reflection codec, which the
// hand-written one must match byte for byte.
func reflectEncode(t *testing.T, v any) []byte {
	t.Helper()
	var b []byte
	if err := codec.NewEncoderBytes(&b, mh).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b
}

func reflectDecodeTask(b []byte) (*Task, error) {
	var tk Task
	err := codec.NewDecoderBytes(b, mh).Decode(&tk)
	return &tk, err
}

// edgeLens are the lengths where msgpack changes header.
var edgeLens = []int{0, 1, 31, 32, 255, 256, 65535, 65536}

var edgeInts = []int64{0, 1, -1, 31, -32, -33, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769,
	65535, 65536, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1, math.MaxInt64, math.MinInt64,
	1_700_000_000_000}

var edgeUints = []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64,
	7 << 16, 123456789 << 16}

func randTask(rng *rand.Rand) *Task {
	str := func() string {
		if rng.IntN(3) == 0 {
			return strings.Repeat("x", edgeLens[rng.IntN(len(edgeLens))])
		}
		return strings.Repeat("é", rng.IntN(20))
	}
	bin := func() []byte {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		return bytes.Repeat([]byte{'7'}, edgeLens[rng.IntN(len(edgeLens))])
	}
	i := func() int64 { return edgeInts[rng.IntN(len(edgeInts))] }
	u := func() uint64 { return edgeUints[rng.IntN(len(edgeUints))] }
	return &Task{Tenant: str(), ID: str(), Queue: str(), Status: str(), Owner: str(), LeaseUntil: i(),
		FencingToken: u(), Version: u(), Attempt: u(), Priority: i(), ArtifactID: str(), Payload: bin(),
		Result: bin(), CreatedAt: i(), UpdatedAt: i(), Seq: u()}
}

func randArgs(rng *rand.Rand) (*TaskUpdateArgs, *QueueClaimArgs) {
	tk := randTask(rng)
	optU := func() *uint64 {
		if rng.IntN(2) == 0 {
			return nil
		}
		v := edgeUints[rng.IntN(len(edgeUints))]
		return &v
	}
	optS := func(s string) *string {
		if rng.IntN(2) == 0 {
			return nil
		}
		return &s
	}
	var statuses []string
	switch rng.IntN(3) {
	case 1:
		statuses = []string{}
	case 2:
		for range edgeLens[rng.IntN(4)] {
			statuses = append(statuses, tk.Status)
		}
	}
	return &TaskUpdateArgs{ID: tk.ID, FencingToken: optU(), ExpectVersion: optU(), ExpectStatus: optS(tk.Owner),
			Status: optS(tk.Status), ArtifactID: optS(tk.ArtifactID), Result: tk.Result, Payload: tk.Payload,
			Release: rng.IntN(2) == 0},
		&QueueClaimArgs{Queue: tk.Queue, Owner: tk.Owner, LeaseMs: tk.LeaseUntil, Statuses: statuses,
			SetStatus: optS(tk.Status), Final: rng.IntN(2) == 0}
}

// checkArgsDecoders: where the hand-written readers accept b, they read
// what the reflection codec reads.
func checkArgsDecoders(t *testing.T, b []byte) (update, claim bool) {
	t.Helper()
	return checkArgsDecoder(t, b, decodeTaskUpdateArgs), checkArgsDecoder(t, b, decodeQueueClaimArgs)
}

// checkArgsDecoder: if read accepts b, the reflection codec reads the same
// value from b, and encode writes that value as the reflection codec does.
func checkArgsDecoder[T any](t *testing.T, b []byte, read func([]byte, *T) error) bool {
	t.Helper()
	var v, ref T
	if read(b, &v) != nil {
		return false
	}
	if err := codec.NewDecoderBytes(b, mh).Decode(&ref); err != nil || !reflect.DeepEqual(v, ref) {
		t.Fatalf("%T %x: fast %+v, reflection %+v (%v)", v, b, v, ref, err)
	}
	if got, want := encode(&v), reflectEncode(t, &v); !bytes.Equal(got, want) {
		t.Fatalf("encode(%+v):\n got %x\nwant %x", v, got, want)
	}
	return true
}

func TestArgsCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range rounds(1000) {
		u, q := randArgs(rng)
		if i == 0 {
			u, q = &TaskUpdateArgs{}, &QueueClaimArgs{}
		}
		if got, want := encode(u), reflectEncode(t, u); !bytes.Equal(got, want) {
			t.Fatalf("encode(%+v):\n got %x\nwant %x", u, got, want)
		}
		if got, want := encode(q), reflectEncode(t, q); !bytes.Equal(got, want) {
			t.Fatalf("encode(%+v):\n got %x\nwant %x", q, got, want)
		}
		if up, _ := checkArgsDecoders(t, encode(u)); !up {
			t.Fatalf("decodeTaskUpdateArgs refused the encoding of %+v", u)
		}
		var back TaskUpdateArgs
		if err := decode(encode(u), &back); err != nil || !reflect.DeepEqual(&back, u) {
			t.Fatalf("decode: %+v (%v), want %+v", back, err, u)
		}
		if _, cl := checkArgsDecoders(t, encode(q)); !cl {
			t.Fatalf("decodeQueueClaimArgs refused the encoding of %+v", q)
		}
		var qb QueueClaimArgs
		if err := decode(encode(q), &qb); err != nil || qb.Queue != q.Queue || qb.Final != q.Final || len(qb.Statuses) != len(q.Statuses) {
			t.Fatalf("decode: %+v (%v), want %+v", qb, err, q)
		}
	}
	for _, n := range []int{15, 16, 65535, 65536} { // where the array header changes
		q := &QueueClaimArgs{Queue: "q", Statuses: make([]string, n)}
		if got, want := encode(q), reflectEncode(t, q); !bytes.Equal(got, want) {
			t.Fatalf("encode of %d statuses differs from the reflection codec's", n)
		}
		checkArgsDecoders(t, encode(q))
	}
	// Another command's arguments, or a field these structs lack, go to
	// the reflection codec, which fails or decodes as it always did.
	b := encode(&TaskClaimArgs{ID: "t", Owner: "w", LeaseMs: 5})
	if up, cl := checkArgsDecoders(t, b); up || cl {
		t.Fatalf("a TaskClaimArgs record was read as update %v / claim %v", up, cl)
	}
}

func TestTaskCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	tasks := []*Task{{}}
	for range rounds(1000) {
		tasks = append(tasks, randTask(rng))
	}
	for _, tk := range tasks {
		want := reflectEncode(t, tk)
		got := encode(tk)
		if !bytes.Equal(got, want) {
			t.Fatalf("encode(%+v):\n got %x\nwant %x", tk, got, want)
		}
		var back Task
		if err := decodeTask(got, &back); err != nil {
			t.Fatalf("decodeTask: %v", err)
		}
		ref, err := reflectDecodeTask(got)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, ref) {
			t.Fatalf("decodeTask gave\n %+v\nthe reflection codec\n %+v", back, *ref)
		}
	}
}

// A record the hand-written reader does not expect (another shape, a
// field it does not know) still decodes, through the reflection codec.
func TestTaskDecodeFallsBack(t *testing.T) {
	type taskWithExtra struct {
		ID    string
		Queue string
		Extra int
	}
	b := reflectEncode(t, &taskWithExtra{ID: "a", Queue: "q", Extra: 3})
	var fast Task
	if decodeTask(b, &fast) == nil {
		t.Fatal("decodeTask accepted a field Task does not have")
	}
	var tk Task
	if err := decode(b, &tk); err != nil || tk.ID != "a" || tk.Queue != "q" {
		t.Fatalf("decode: %+v, %v; want the reflection codec's ID a, Queue q", tk, err)
	}
}

func randCommand(rng *rand.Rand) *Command {
	t := randTask(rng) // its strings, slices and integers, reused
	c := &Command{Kind: Kind(t.Status), Now: t.CreatedAt, Tenant: t.Tenant, Principal: t.Owner,
		IdemKey: t.ID, IdemFP: t.Result, IdemTTL: t.LeaseUntil, Args: t.Payload}
	if rng.IntN(4) == 0 { // in a session: a version 2 entry
		c.Session, c.Seq, c.Ack = edgeUints[rng.IntN(len(edgeUints))], edgeUints[rng.IntN(len(edgeUints))], edgeUints[rng.IntN(len(edgeUints))]
	}
	return c
}

// commandV1 is Command as version 1 entries hold it, before sessions.
type commandV1 struct {
	Kind              Kind
	Now               int64
	Tenant, Principal string
	IdemKey           string
	IdemFP            []byte
	IdemTTL           int64
	Args              []byte
}

// reflectEntry is the entry the reflection codec makes of cmds: version 2
// with every Command field when one is in a session, else version 1 with
// the fields of that version.
func reflectEntry(t *testing.T, cmds []*Command) []byte {
	t.Helper()
	for _, c := range cmds {
		if c != nil && c.inSession() {
			return append([]byte{EntryVersion2}, reflectEncode(t, cmds)...)
		}
	}
	var v1 []*commandV1
	if cmds != nil {
		v1 = make([]*commandV1, len(cmds))
	}
	for i, c := range cmds {
		if c != nil {
			v1[i] = &commandV1{Kind: c.Kind, Now: c.Now, Tenant: c.Tenant, Principal: c.Principal,
				IdemKey: c.IdemKey, IdemFP: c.IdemFP, IdemTTL: c.IdemTTL, Args: c.Args}
		}
	}
	return append([]byte{EntryVersion}, reflectEncode(t, v1)...)
}

func reflectDecodeCommands(b []byte) ([]*Command, error) {
	var cmds []*Command
	err := codec.NewDecoderBytes(b, mh).Decode(&cmds)
	return cmds, err
}

func TestCommandCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{1, 2, 15, 16, 17, 255, MaxCommandsPerEntry} {
		for range max(2, rounds(40)/n) {
			cmds := make([]*Command, n)
			for i := range cmds {
				cmds[i] = randCommand(rng)
			}
			want := reflectEntry(t, cmds)
			got := EncodeEntry(cmds)
			if !bytes.Equal(got, want) {
				t.Fatalf("EncodeEntry of %d commands:\n got %x\nwant %x", n, got, want)
			}
			back, err := decodeCommands(got[1:], MaxCommandsPerEntry)
			if err != nil {
				t.Fatalf("decodeCommands of %d: %v", n, err)
			}
			ref, err := reflectDecodeCommands(got[1:])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, ref) {
				t.Fatalf("decodeCommands of %d differs from the reflection codec", n)
			}
		}
	}
	// What the fast reader leaves to the reflection codec: DecodeEntry
	// still refuses it, as before.
	tooMany := make([]*Command, MaxCommandsPerEntry+1)
	for i := range tooMany {
		tooMany[i] = &Command{Kind: "k"}
	}
	for _, cmds := range [][]*Command{{}, {nil}, {{Kind: "a"}, nil}, tooMany} {
		b := EncodeEntry(cmds)
		if !bytes.Equal(b, reflectEntry(t, cmds)) {
			t.Fatalf("EncodeEntry(%d commands) differs from the reflection codec", len(cmds))
		}
		if _, err := DecodeEntry(b); err == nil {
			t.Errorf("DecodeEntry accepted %d commands (%v)", len(cmds), cmds)
		}
	}
}

func randIdemRecord(rng *rand.Rand) *idemRecord {
	t := randTask(rng)
	return &idemRecord{FP: t.Payload, Expires: t.CreatedAt, Result: Result{Code: t.Status, Message: t.Owner,
		Details: t.Result, Outcome: Outcome(rng.IntN(256)), Value: t.Payload, Index: t.Seq, Replay: rng.IntN(2) == 0,
		Obj: t}} // Obj is never encoded
}

// checkRecordCodec: encode writes rec as the reflection codec does, and
// read reads those bytes back as the reflection codec does.
func checkRecordCodec[T any](t *testing.T, rec *T, read func([]byte, *T) error) {
	t.Helper()
	want := reflectEncode(t, rec)
	got := encode(rec)
	if !bytes.Equal(got, want) {
		t.Fatalf("encode(%+v):\n got %x\nwant %x", rec, got, want)
	}
	var back, ref T
	if err := read(got, &back); err != nil {
		t.Fatalf("hand-written reader of %T: %v", rec, err)
	}
	if err := codec.NewDecoderBytes(got, mh).Decode(&ref); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ref) {
		t.Fatalf("the hand-written reader gave\n %+v\nthe reflection codec\n %+v", back, ref)
	}
}

func TestIdemRecordCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for range rounds(1000) {
		checkRecordCodec(t, randIdemRecord(rng), decodeIdemRecord)
	}
}

func randSessionRecord(rng *rand.Rand) *sessionRecord {
	i := func() int64 { return edgeInts[rng.IntN(len(edgeInts))] }
	u := func() uint64 { return edgeUints[rng.IntN(len(edgeUints))] }
	return &sessionRecord{ID: u(), Floor: u(), Expires: i(), TTL: i(), Answers: i(), Bytes: i()}
}

func TestSessionRecordCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	recs := []*sessionRecord{{}}
	for range rounds(1000) {
		recs = append(recs, randSessionRecord(rng))
	}
	for _, rec := range recs {
		checkRecordCodec(t, rec, decodeSessionRecord)
		var back sessionRecord
		if err := decodeSessionRecord(encode(rec), &back); err != nil || back != *rec {
			t.Fatalf("session record %+v read back as %+v", *rec, back)
		}
	}
}

// FuzzCodecs: whatever the bytes, each hand-written reader (task record,
// log entry, idempotency record) either refuses them or reads what the
// reflection codec reads, and what it read encodes back to the reflection
// codec's bytes; and the Store's stored form (stored.go) of the bytes
// gives them back.
func FuzzCodecs(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	for n := range 10 {
		f.Add(encode(randTask(rng)))
		f.Add(encode(randIdemRecord(rng)))
		f.Add(encode(randSessionRecord(rng)))
		cmds := []*Command{randCommand(rng)}
		for range n * 2 {
			cmds = append(cmds, randCommand(rng))
		}
		f.Add(EncodeEntry(cmds)[1:])
		u, q := randArgs(rng)
		f.Add(encode(u))
		f.Add(encode(q))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkArgsDecoders(t, b)
		stored := checkStored(t, b) // the Store's form of any value gives it back
		var tk Task
		if decodeTask(b, &tk) == nil {
			ref, err := reflectDecodeTask(b)
			if err != nil || !reflect.DeepEqual(&tk, ref) {
				t.Fatalf("task %x: fast %+v, reflection %+v (%v)", b, tk, ref, err)
			}
			if got, want := encode(&tk), reflectEncode(t, &tk); !bytes.Equal(got, want) {
				t.Fatalf("encode(%+v):\n got %x\nwant %x", tk, got, want)
			}
			// A task record as encode writes it is stored without its
			// field names.
			if bytes.Equal(encode(&tk), b) && (len(stored) < 2 || stored[1] != storedTask) {
				t.Fatalf("task record %x stored as %x", b, stored)
			}
		}
		// Reading a task from its stored form reads what decodeTask
		// reads from the record, and refuses what it refuses.
		var st Task
		if ok := decodeStoredTask(stored, &st); ok != (decodeTask(b, &Task{}) == nil && len(stored) > 1 && stored[0] == storedTag && stored[1] == storedTask) {
			t.Fatalf("record %x, stored %x: decodeStoredTask says %v", b, stored, ok)
		} else if ok && !reflect.DeepEqual(st, tk) {
			t.Fatalf("record %x: from the stored form %+v, decodeTask %+v", b, st, tk)
		}
		if cmds, err := decodeCommands(b, MaxCommandsPerEntry); err == nil {
			ref, err := reflectDecodeCommands(b)
			if err != nil || !reflect.DeepEqual(cmds, ref) {
				t.Fatalf("entry %x: the reflection codec reads it otherwise (%v)", b, err)
			}
			if got, want := EncodeEntry(cmds), reflectEntry(t, cmds); !bytes.Equal(got, want) {
				t.Fatalf("EncodeEntry:\n got %x\nwant %x", got, want)
			}
		}
		var sr, sref sessionRecord
		if decodeSessionRecord(b, &sr) == nil {
			if err := codec.NewDecoderBytes(b, mh).Decode(&sref); err != nil || sr != sref {
				t.Fatalf("session record %x: fast %+v, reflection %+v (%v)", b, sr, sref, err)
			}
			if got, want := encode(&sr), reflectEncode(t, &sr); !bytes.Equal(got, want) {
				t.Fatalf("encode(%+v):\n got %x\nwant %x", sr, got, want)
			}
		}
		var rec, ref idemRecord
		if decodeIdemRecord(b, &rec) == nil {
			if err := codec.NewDecoderBytes(b, mh).Decode(&ref); err != nil || !reflect.DeepEqual(rec, ref) {
				t.Fatalf("idempotency record %x: fast %+v, reflection %+v (%v)", b, rec, ref, err)
			}
			if got, want := encode(&rec), reflectEncode(t, &rec); !bytes.Equal(got, want) {
				t.Fatalf("encode(%+v):\n got %x\nwant %x", rec, got, want)
			}
		}
	})
}

// Command.Size, which group commit budgets entries by, is never below what
// the command takes in an entry and not far above it.
func TestCommandSize(t *testing.T) {
	for _, n := range []int{0, 31, 255, 65_535, 1 << 20} {
		c := NewCommand(KindTaskUpdate, 1_700_000_000_000, "tenant", "principal", &TaskUpdateArgs{ID: "task-1", Payload: []byte(`"` + strings.Repeat("p", n) + `"`)})
		c.IdemKey, c.IdemFP, c.IdemTTL = "key-1", make([]byte, 32), 86_400_000
		single := len(EncodeEntry([]*Command{c}))
		pair := len(EncodeEntry([]*Command{c, c}))
		inEntry := pair - single // one more command in an entry
		if c.Size() < inEntry || c.Size() > inEntry+64 {
			t.Errorf("payload %d: Size %d, %d bytes in an entry", n, c.Size(), inEntry)
		}
	}
}

// TestDecodeEmptyInput: decoding nothing fails with io.EOF whatever the
// pooled decoder decoded before. (go-msgpack's ResetBytes ignores nil, so
// a reused decoder went on from its previous input, and replicas could
// store different error messages for one bad command.)
func TestDecodeEmptyInput(t *testing.T) {
	var a TaskClaimArgs
	if err := decode(append(encode(&TaskClaimArgs{ID: "x"}), 0x01), &a); err != nil {
		t.Fatalf("decode with a trailing byte: %v", err)
	}
	for _, in := range [][]byte{nil, {}} {
		var b TaskClaimArgs
		if err := decode(in, &b); !errors.Is(err, io.EOF) {
			t.Errorf("decode(%#v): got %v, want io.EOF", in, err)
		}
	}
}

// mustJSON encodes a task with Task.MarshalJSON directly; the bytes must
// be json.Marshal's, HTML escaping, invalid UTF-8 and whitespace in the
// payload included: every replica keeps them as a session's answer.
func TestMustJSONTask(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	odd := []string{"", "<a>&b", "\u2028\u2029", "\xff\xfe", "tab\tnl\n\"q\"\\", "\x00\x1f\x7f", "é日本"}
	oddJSON := []string{`{ "a" : [1, 2] ,"b":"<&>"}`, "\n\"\u2028\" ", `null`, `[ ]`, `{"k":"\u003c"}`,
		`{"a b":"c d","e":"\" }\\"}`, `{"a":"\u00e9","b":[true,false,null,-1.5e3]}`, `"x\ty"`, `{"a":1,}`, `{"é":1}`, `[1 ]`, `"\\"`}
	str := func() string { return odd[rng.IntN(len(odd))] }
	tasks := []*Task{{}, {Life: &TaskLife{}}}
	for range rounds(2000) {
		tk := randTask(rng)
		tk.Tenant, tk.Owner, tk.Status = str(), str(), str()
		if rng.IntN(2) == 0 {
			tk.Payload = []byte(oddJSON[rng.IntN(len(oddJSON))])
		}
		if rng.IntN(2) == 0 {
			tk.Result = []byte(oddJSON[rng.IntN(len(oddJSON))])
		}
		if rng.IntN(3) == 0 {
			tk.Life = &TaskLife{MaxAttempts: uint64(rng.IntN(5)), BackoffInitialMs: edgeInts[rng.IntN(len(edgeInts))],
				AvailableAt: edgeInts[rng.IntN(len(edgeInts))], LastError: str(), FailedAt: edgeInts[rng.IntN(len(edgeInts))],
				RetentionMs: int64(rng.IntN(2)) * 1000, ExpiresAt: int64(rng.IntN(2)) * 1_700_000_000_000}
		}
		if rng.IntN(3) == 0 {
			tk.Deps = &TaskDeps{Total: uint64(rng.IntN(3)), Left: uint64(rng.IntN(3)), Policy: []string{"", DepPolicyFail, str()}[rng.IntN(3)]}
		}
		if rng.IntN(3) == 0 {
			tk.Waitpoint, tk.Parked, tk.CancelRequested, tk.ConcurrencyKey = str(), rng.IntN(2) == 0, rng.IntN(2) == 0, str()
		}
		tasks = append(tasks, tk)
	}
	for _, tk := range tasks {
		// The wire form as encoding/json's reflection writes it: what
		// Task.MarshalJSON's own writer (appendPlain) must match.
		want, err := json.Marshal(tk.wire())
		if err != nil { // an invalid payload or result: an error as well
			if _, err := tk.MarshalJSON(); err == nil {
				t.Fatalf("Task.MarshalJSON(%+v): no error, json.Marshal's: %v", tk, err)
			}
			continue
		}
		if got := mustJSON(tk); !bytes.Equal(got, want) {
			t.Fatalf("mustJSON(%+v):\n got %s\nwant %s", tk, got, want)
		}
		if got, err := json.Marshal(tk); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("json.Marshal(%+v): %v\n got %s\nwant %s", tk, err, got, want)
		}
	}
	valid := tasks[:0:0]
	for _, tk := range tasks {
		if _, err := json.Marshal(tk); err == nil {
			valid = append(valid, tk)
		}
	}
	if got := mustJSON((*Task)(nil)); string(got) != "null" {
		t.Fatalf("mustJSON(nil task) = %s", got)
	}
	// The queue's batch answers, written task by task: json.Marshal's
	// bytes, whatever their lists hold.
	errs := []*BatchError{nil, {Code: "conflict", Message: "<stale> & \u2028"},
		{Code: "not_found", Message: str(), Details: json.RawMessage(`{"task_id":"a<b","n":1.50}`)}}
	answers := []any{(*UpdateBatchAnswer)(nil), (*ClaimBatch)(nil), &UpdateBatchAnswer{}, &ClaimBatch{},
		&UpdateBatchAnswer{Results: []UpdateOutcome{}, Next: []any{}}, &ClaimBatch{Tasks: []any{}},
		&UpdateBatchAnswer{Results: []UpdateOutcome{{}}, Next: []any{(*Task)(nil), "x", nil}},
		&ClaimBatch{Tasks: []any{(*Task)(nil), map[string]int{"b": 1, "a": 2}}}}
	for range rounds(300) {
		n := func() int { return rng.IntN(4) }
		ua := &UpdateBatchAnswer{Results: make([]UpdateOutcome, n()), Next: []any{}}
		for i := range ua.Results {
			if rng.IntN(3) > 0 {
				ua.Results[i].Task = valid[rng.IntN(len(valid))]
			}
			ua.Results[i].Error = errs[rng.IntN(len(errs))]
		}
		cb := &ClaimBatch{Tasks: []any{}}
		for range n() {
			ua.Next = append(ua.Next, valid[rng.IntN(len(valid))])
			cb.Tasks = append(cb.Tasks, valid[rng.IntN(len(valid))])
		}
		answers = append(answers, ua, cb)
	}
	for _, a := range answers {
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if got := mustJSON(a); !bytes.Equal(got, want) {
			t.Fatalf("mustJSON(%T):\n got %s\nwant %s", a, got, want)
		}
	}
}

// TestTaskJSONWriterHasEveryField: appendPlain, Task.MarshalJSON's own
// writer, writes every member of taskJSON. A member added to the struct
// and not to the writer would be dropped from answers silently wherever
// the random tasks of TestMustJSONTask leave it zero; here every member
// is set, by reflection, so such a member fails this test.
func TestTaskJSONWriterHasEveryField(t *testing.T) {
	var w taskJSON
	v := reflect.ValueOf(&w).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeOf(json.RawMessage(nil)):
			f.Set(reflect.ValueOf(json.RawMessage(`{"n":1}`)))
		case f.Kind() == reflect.String:
			f.SetString("s" + strconv.Itoa(i))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.Int64:
			f.SetInt(int64(i + 1))
		case f.Kind() == reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.String:
			s := "p" + strconv.Itoa(i)
			f.Set(reflect.ValueOf(&s))
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Uint64:
			n := uint64(i + 1)
			f.Set(reflect.ValueOf(&n))
		default:
			t.Fatalf("taskJSON.%s: a %s, which this test does not fill; teach it, and appendPlain", v.Type().Field(i).Name, f.Type())
		}
	}
	want, err := json.Marshal(&w)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := w.appendPlain(nil)
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("appendPlain (ok %v):\n got %s\nwant %s", ok, got, want)
	}
}
