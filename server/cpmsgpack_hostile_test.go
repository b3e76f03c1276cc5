package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// mpMap1 is a msgpack map of one member, key (a str of up to 31 bytes)
// with the value's raw bytes.
func mpMap1(key string, value ...byte) []byte {
	return append(append([]byte{0x81, 0xa0 | byte(len(key))}, key...), value...)
}

// mpWrite1 is a writes body of one write to channel c with these raw
// members after it (count: how many).
func mpWrite1(count byte, members ...byte) []byte {
	w := append([]byte{0x80 | (count + 1), 0xa7}, "channel"...)
	w = append(w, 0xa1, 'c')
	return mpMap1("writes", append([]byte{0x91}, append(w, members...)...)...)
}

// TestCheckpointMsgpackHostile: msgpack bodies built to hurt the decoder
// (lengths announcing 2^32 entries or bytes, nesting past any depth,
// keys and values of types the route does not take, integers past
// int64) are 400 invalid_argument in JSON and write nothing. An unsigned
// idx past 2^63-1 used to be wrapped by the codec into a negative index
// (2^64-2 became -2, a LangGraph special write) and stored.
func TestCheckpointMsgpackHostile(t *testing.T) {
	fx := newAPIFixture(t)
	f := fx.c.nodes[0].fsm
	mp := with(adminAuth(), "Content-Type", mediaMsgpack)
	deep := append(bytes.Repeat([]byte{0x91}, 5000), 0x01)
	data := func(v ...byte) []byte { return mpMap1("data", v...) }
	u32 := []byte{0xff, 0xff, 0xff, 0xff}
	put, writes := cpPath("th", "/checkpoints/c1"), cpPath("th", "/checkpoints/c1/writes/t1")
	for _, tc := range []struct {
		name, path string
		body       []byte
		msg        string // in the message, when not ""
	}{
		{"a map of 2^32 members", put, append([]byte{0xdf}, u32...), ""},
		{"an array of 2^32 items", put, append([]byte{0xdd}, u32...), ""},
		{"data: a map of 2^32 members", put, data(append([]byte{0xdf}, u32...)...), ""},
		{"data: an array of 2^32 items", put, data(append([]byte{0xdd}, u32...)...), ""},
		{"data: a str of 4 GiB", put, data(append([]byte{0xdb}, u32...)...), ""},
		{"data: a bin of 4 GiB", put, data(append([]byte{0xc6}, u32...)...), ""},
		{"data: 5,000 nested arrays", put, data(deep...), "depth"},
		{"data: an integer key", put, data(0x81, 0x01, 0x02), ""},
		{"data: a map as a key", put, data(0x81, 0x80, 0x02), ""},
		{"data: an ext", put, data(0xd4, 0x05, 0x01), "not a JSON value"},
		{"data: a timestamp", put, data(0xd6, 0xff, 0, 0, 0, 1), "not a JSON value"},
		{"data: a float32 NaN", put, data(0xca, 0x7f, 0xc0, 0, 0), "NaN"},
		{"an integer key", put, []byte{0x81, 0x01, 0x02}, ""},
		{"an integer body", put, []byte{0x01}, ""},
		{"fence: a str", put, append(data(0x01), mpMap1("fence", 0xa1, 'x')[1:]...), ""},
		{"blobs: a map", put, append(data(0x01), mpMap1("blobs", 0x81, 0x01, 0x01)[1:]...), ""},
		{"blobs: 2^32 items", put, append(data(0x01), mpMap1("blobs", append([]byte{0xdd}, u32...)...)[1:]...), ""},
		{"blob_versions: 2^32 members", put, append(data(0x01), mpMap1("blob_versions", append([]byte{0xdf}, u32...)...)[1:]...), ""},
		{"blob_versions: an integer version", put, append(data(0x01), mpMap1("blob_versions", 0x81, 0xa1, 'm', 0x01)[1:]...), ""},
		{"parent_id: an integer", put, append(data(0x01), mpMap1("parent_id", 0x01)[1:]...), ""},
		{"fork: a str", put, append(data(0x01), mpMap1("fork", 0xa1, 'x')[1:]...), ""},
		{"writes: a str", writes, mpMap1("writes", 0xa1, 'x'), ""},
		{"writes: 2^32 items", writes, mpMap1("writes", append([]byte{0xdd}, u32...)...), ""},
		{"idx: a str", writes, mpWrite1(2, append(append([]byte{0xa5}, "value"...), 0x01, 0xa3, 'i', 'd', 'x', 0xa1, 'x')...), "idx"},
		{"idx: a float", writes, mpWrite1(2, append(append([]byte{0xa5}, "value"...), 0x01, 0xa3, 'i', 'd', 'x', 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0)...), "idx"},
		{"idx: 2^64-2", writes, mpWrite1(2, append(append([]byte{0xa5}, "value"...), 0x01, 0xa3, 'i', 'd', 'x', 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe)...), "idx"},
		{"idx: 2^63", writes, mpWrite1(2, append(append([]byte{0xa5}, "value"...), 0x01, 0xa3, 'i', 'd', 'x', 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0)...), "idx"},
		{"value: 5,000 nested arrays", writes, mpWrite1(1, append(append([]byte{0xa5}, "value"...), deep...)...), "depth"},
	} {
		before := f.Status()
		st, h, b := fx.c.do(t, 0, "PUT", tc.path, tc.body, mp)
		if st != 400 || errorCode(b) != "invalid_argument" || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || !strings.Contains(string(b), tc.msg) {
			t.Errorf("%s: %d %s %.300q, want 400 invalid_argument in JSON (saying %q)", tc.name, st, h.Get("Content-Type"), b, tc.msg)
		}
		if after := f.Status(); after.AppliedIndex != before.AppliedIndex || after.StateDigest != before.StateDigest {
			t.Errorf("%s: the state changed (applied %d to %d)", tc.name, before.AppliedIndex, after.AppliedIndex)
		}
	}
	// An unsigned idx within int64 and a negative one are the indexes sent.
	body := mpWrite1(2, append(append([]byte{0xa5}, "value"...), 0x01, 0xa3, 'i', 'd', 'x', 0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)...)
	if st, _, b := fx.c.do(t, 0, "PUT", writes, body, mp); st != 400 || !strings.Contains(string(b), "9223372036854775807") {
		t.Errorf("idx 2^63-1: %d %s, want 400 naming the index (out of a write's range)", st, b)
	}
	for _, idx := range [][]byte{{0x03}, {0xcc, 0x07}, {0xfe}} {
		body := mpWrite1(2, append(append([]byte{0xa5}, "value"...), append([]byte{0x01, 0xa3, 'i', 'd', 'x'}, idx...)...)...)
		if st, _, b := fx.c.do(t, 0, "PUT", writes, body, mp); st != 201 {
			t.Errorf("idx % x: %d %s, want 201", idx, st, b)
		}
	}
	if st, _, b := fx.c.do(t, 0, "PUT", put, `{"data":1}`, adminAuth()); st != 201 {
		t.Fatalf("put c1: %d %s", st, b)
	}
	st, _, b := fx.c.do(t, 0, "GET", put, nil, adminAuth())
	var got struct {
		PendingWrites []struct {
			Idx int64 `json:"idx"`
		} `json:"pending_writes"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("GET c1: %v (%s)", err, b)
	}
	var idxs []int64
	for _, w := range got.PendingWrites {
		idxs = append(idxs, w.Idx)
	}
	if st != 200 || len(idxs) != 3 || !slices.Contains(idxs, 3) || !slices.Contains(idxs, 7) || !slices.Contains(idxs, -2) {
		t.Errorf("writes stored at %v (%d %s), want 3, 7 and -2 only", idxs, st, b)
	}
}
