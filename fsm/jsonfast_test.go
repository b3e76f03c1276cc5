package fsm

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

var awkwardStrings = []string{
	"", "plain", "with space", `quote"d`, `back\slash`, "<b>&amp;</b>", "tab\there", "nl\n", "\x00\x1f\x7f",
	"é ü 中文 🙂", "line\u2028sep\u2029", "bad utf8 \xff\xfe", "\u00e9", "a/b", "' single",
}

var awkwardRaw = []string{
	`{}`, `null`, `{"a":1}`, `{ "a" : [1, 2,	3] }`, "{\n  \"x\": \"<y>\"\n}", `"s&t"`, `{"u":"é\u2028"}`, `[1,2]`, `12.5e3`,
	`{"a":"\u003c"}`, `{"k":"line` + "\u2028" + `"}`, `true`, `""`,
}

func checkTaskJSON(t *testing.T, task *Task) {
	t.Helper()
	want, err := marshalTaskSlow(task)
	if err != nil {
		t.Fatalf("reference encoding: %v", err)
	}
	got, err := task.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("task JSON differs from encoding/json's\n got %s\nwant %s", got, want)
	}
	// What the API answers goes through json.Marshal of the whole value.
	viaMarshal, err := json.Marshal(task)
	if err != nil || !bytes.Equal(viaMarshal, want) {
		t.Fatalf("json.Marshal(task) = %s %v, want %s", viaMarshal, err, want)
	}
	if fast := mustJSON(task); !bytes.Equal(fast, want) {
		t.Fatalf("mustJSON(task) = %s, want %s", fast, want)
	}
}

func TestTaskJSONMatchesEncodingJSON(t *testing.T) {
	base := Task{Tenant: "acme", ID: "t-1", Queue: "research", Status: "running", Owner: "w1",
		LeaseUntil: 1_764_000_000_123, FencingToken: 1 << 60, Version: 7, Attempt: 2, Priority: -3,
		ArtifactID: "sha256:ab", Payload: []byte(`{"a":1}`), Result: []byte(`{"ok":true}`),
		CreatedAt: 1_700_000_000_000, UpdatedAt: 1_764_000_000_999}
	checkTaskJSON(t, &base)
	empty := Task{}
	checkTaskJSON(t, &empty)
	for _, s := range awkwardStrings {
		for _, field := range []*string{&base.Tenant, &base.ID, &base.Queue, &base.Status, &base.Owner, &base.ArtifactID} {
			task := base
			task.Payload, task.Result = nil, nil
			old := *field
			*field = s
			checkTaskJSON(t, &task)
			*field = old
		}
	}
	for _, raw := range awkwardRaw {
		task := base
		task.Payload, task.Result = []byte(raw), []byte(raw)
		checkTaskJSON(t, &task)
	}
}

func FuzzTaskJSON(f *testing.F) {
	for i, s := range awkwardStrings {
		f.Add(s, awkwardRaw[i%len(awkwardRaw)], int64(i), uint64(i)<<40)
	}
	f.Fuzz(func(t *testing.T, s, raw string, n int64, u uint64) {
		if !json.Valid([]byte(raw)) {
			raw = "{}" // stored payloads are validated when they come in
		}
		task := Task{Tenant: s, ID: s, Queue: "q", Status: s, Owner: s, LeaseUntil: n, FencingToken: u,
			Version: u, Priority: n, ArtifactID: s, Payload: []byte(raw), Result: []byte(raw), CreatedAt: n, UpdatedAt: n}
		checkTaskJSON(t, &task)
	})
}

// appendMillis writes what time.AppendFormat writes with TimeFormat.
func TestAppendMillis(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	minMs := time.Date(-2, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxMs := time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	cases := []int64{0, -1, 1, 999, 1000, -1000, 1798675200000, 253402300799999, 253402300800000,
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() - 1, minMs, maxMs}
	for range 100000 {
		cases = append(cases, minMs+r.Int64N(maxMs-minMs))
	}
	for _, ms := range cases {
		want := time.UnixMilli(ms).UTC().Format(TimeFormat)
		if got := string(appendMillis([]byte("x"), ms)); got != "x"+want {
			t.Fatalf("appendMillis(%d) = %q, want %q", ms, got[1:], want)
		}
		if got := FormatMillis(ms); got != want {
			t.Fatalf("FormatMillis(%d) = %q, want %q", ms, got, want)
		}
	}
}
