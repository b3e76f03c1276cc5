package server

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

func mpEncode(t testing.TB, v any) []byte {
	t.Helper()
	var b []byte
	if err := codec.NewEncoderBytes(&b, mpHandle).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b
}

func mpDecode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := codec.NewDecoderBytes(b, mpHandle).Decode(&v); err != nil {
		t.Fatalf("answer is not a msgpack map: %v (%q)", err, b)
	}
	return v
}

// TestCheckpointMsgpack: the saver's routes take and answer
// application/msgpack, bytes as bin (blobs, typed writes) and data and
// metadata as values, the same checkpoints JSON reads; JSON stays the
// default.
func TestCheckpointMsgpack(t *testing.T) {
	fx := newAPIFixture(t)
	mp := with(adminAuth(), "Content-Type", mediaMsgpack, "Accept", mediaMsgpack)
	blob := []byte{0x92, 0xa1, 'x', 0x00, 0xff} // not UTF-8: bin only
	put := mpEncode(t, map[string]any{
		"data": map[string]any{"v": int64(1), "f": 1.5}, "metadata": map[string]any{"step": int64(-1), "source": "input"},
		"blob_versions": map[string]string{"m": "1"},
		"blobs":         []any{map[string]any{"channel": "m", "version": "1", "type": "msgpack", "b64": blob}},
	})
	st, h, b := fx.c.do(t, 0, "PUT", cpPath("th", "/checkpoints/c1"), put, mp)
	if st != 201 || h.Get("Content-Type") != mediaMsgpack {
		t.Fatalf("msgpack put: %d %s %q", st, h.Get("Content-Type"), b)
	}
	if got := mpDecode(t, b); got["checkpoint_id"] != "c1" || got["metadata"].(map[string]any)["step"] != int64(-1) {
		t.Errorf("put answer: %v", got)
	}
	writes := mpEncode(t, map[string]any{"task_path": "p", "writes": []any{
		map[string]any{"channel": "m", "type": "msgpack", "b64": blob},
		map[string]any{"channel": "__error__", "idx": int64(-1), "value": map[string]any{"e": "x"}},
	}})
	st, _, b = fx.c.do(t, 0, "PUT", cpPath("th", "/checkpoints/c1/writes/t1"), writes, mp)
	if st != 201 {
		t.Fatalf("msgpack writes: %d %q", st, b)
	}
	if ws := mpDecode(t, b)["writes"].([]any); len(ws) != 2 || !bytes.Equal(ws[1].(map[string]any)["b64"].([]byte), blob) {
		t.Errorf("writes answer: %v", ws)
	}
	st, h, b = fx.c.do(t, 0, "GET", cpPath("th", "/checkpoints/latest"), nil, mp)
	if st != 200 || h.Get("Content-Type") != mediaMsgpack {
		t.Fatalf("msgpack get: %d %q", st, b)
	}
	got := mpDecode(t, b)
	if bl := got["blobs"].([]any)[0].(map[string]any); !bytes.Equal(bl["b64"].([]byte), blob) || bl["type"] != "msgpack" {
		t.Errorf("blob: %v", bl)
	}
	if d := got["data"].(map[string]any); d["v"] != int64(1) || d["f"] != 1.5 {
		t.Errorf("data: %v", d)
	}
	pw := got["pending_writes"].([]any)
	if len(pw) != 2 || pw[0].(map[string]any)["value"].(map[string]any)["e"] != "x" ||
		!bytes.Equal(pw[1].(map[string]any)["b64"].([]byte), blob) || pw[1].(map[string]any)["task_path"] != "p" {
		t.Errorf("pending writes: %v", pw)
	}
	for _, path := range []string{cpPath("th", "/checkpoints?pending_writes=true"), "/v1/tenants/acme/checkpoints?pending_writes=true"} {
		st, _, b = fx.c.do(t, 0, "GET", path, nil, mp)
		if st != 200 {
			t.Fatalf("msgpack list %s: %d %q", path, st, b)
		}
		if cps := mpDecode(t, b)["checkpoints"].([]any); len(cps) != 1 || len(cps[0].(map[string]any)["pending_writes"].([]any)) != 2 {
			t.Errorf("list %s: %v", path, cps)
		}
	}
	// The same checkpoint in JSON: bytes in base64.
	st, h, b = fx.c.do(t, 0, "GET", cpPath("th", "/checkpoints/c1"), nil, adminAuth())
	want := `"type":"msgpack","b64":"` + base64.StdEncoding.EncodeToString(blob) + `"`
	if st != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || strings.Count(string(b), want) != 2 {
		t.Errorf("JSON get: %d %s, want the blob and the write as %s", st, b, want)
	}
}

// TestCheckpointMsgpackRefused: a bad msgpack body is 400 (in JSON) and
// writes nothing; bytes where JSON is due are refused; authorization
// comes before the body is read.
func TestCheckpointMsgpackRefused(t *testing.T) {
	fx := newAPIFixture(t)
	mp := with(adminAuth(), "Content-Type", mediaMsgpack, "Accept", mediaMsgpack)
	good := map[string]any{"data": map[string]any{"v": int64(1)}}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"not msgpack", []byte("{\"data\":1}")},
		{"truncated", mpEncode(t, good)[:5]},
		{"trailing bytes", append(mpEncode(t, good), 0x01)},
		{"unknown member", mpEncode(t, map[string]any{"data": int64(1), "datum": int64(2)})},
		{"bin in data", mpEncode(t, map[string]any{"data": map[string]any{"x": []byte{1}}})},
		{"no data", mpEncode(t, map[string]any{"metadata": map[string]any{}})},
		{"blob without bytes", mpEncode(t, map[string]any{"data": int64(1), "blob_versions": map[string]string{"m": "1"},
			"blobs": []any{map[string]any{"channel": "m", "version": "1", "type": "msgpack"}}})},
	} {
		st, h, b := fx.c.do(t, 0, "PUT", cpPath("th", "/checkpoints/c1"), tc.body, mp)
		if st != 400 || errorCode(b) != "invalid_argument" || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %s %s, want 400 invalid_argument in JSON", tc.name, st, h.Get("Content-Type"), b)
		}
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"a value and bytes", mpEncode(t, map[string]any{"writes": []any{map[string]any{"channel": "c", "value": int64(1), "type": "json", "b64": []byte("1")}}})},
		{"bytes without type", mpEncode(t, map[string]any{"writes": []any{map[string]any{"channel": "c", "b64": []byte("1")}}})},
		{"bin as value", mpEncode(t, map[string]any{"writes": []any{map[string]any{"channel": "c", "value": []byte("1")}}})},
	} {
		if st, _, b := fx.c.do(t, 0, "PUT", cpPath("th", "/checkpoints/c1/writes/t"), tc.body, mp); st != 400 {
			t.Errorf("writes, %s: %d %s, want 400", tc.name, st, b)
		}
	}
	if st, _, b := fx.c.do(t, 0, "GET", cpPath("th", "/checkpoints"), nil, adminAuth()); st != 200 || !strings.Contains(string(b), `"checkpoints":[]`) {
		t.Errorf("refused puts wrote something: %d %s", st, b)
	}
	reader := bearer(fx.reader) // kv read only
	st, _, b := fx.c.do(t, 0, "PUT", cpPath("th", "/checkpoints/c1"), []byte{0xc1}, with(reader, "Content-Type", mediaMsgpack))
	if st != 403 || errorCode(b) != "forbidden" {
		t.Errorf("a principal without a checkpoints grant: %d %s, want 403 before the body is read", st, b)
	}
	// The request body limit holds for msgpack bodies, before decoding.
	big := mpEncode(t, map[string]any{"data": strings.Repeat("x", 2<<20)})
	if st, _, b := fx.c.do(t, 0, "PUT", cpPath("th", "/checkpoints/c1"), big, mp); st != 413 {
		t.Errorf("a 2 MiB msgpack body: %d %.200s, want 413", st, b)
	}
}
