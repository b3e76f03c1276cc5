package server

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// TestCheckpointBlobChunksHTTP: a value held in chunks (uploaded first,
// by a checkpoints writer) is named by its chunks in blobs[].chunks; a GET
// and lists answer its bytes in b64, in JSON and msgpack; a later version
// of the same bytes names the same chunks (the parent's: allowed). A
// chunk not held is 400 missing_chunks, a chunk of an artifact the caller
// may not read 403, b64 with chunks 400; nothing is written then.
func TestCheckpointBlobChunksHTTP(t *testing.T) {
	fx := newAPIFixture(t)
	writer := bearer(fx.createPrincipal(t, adminAuth(), "acme",
		`{"name":"graph","grants":[{"resource":"checkpoints","prefix":"th","actions":["read","write"]}]}`))
	upload := func(auth map[string]string, content []byte) string {
		t.Helper()
		d := digestOf(content)
		if st, _, b := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/chunks/"+d, content, auth); st != 201 && st != 200 {
			t.Fatalf("chunk upload: %d %s", st, b)
		}
		return d
	}
	p0, p1 := bytes.Repeat([]byte{0xff, 0x00}, 3000), []byte("the rest\x01")
	d0, d1 := upload(writer, p0), upload(writer, p1)
	value := append(append([]byte{}, p0...), p1...)
	chunks := fmt.Sprintf(`[{"digest":%q,"size":%d},{"digest":%q,"size":%d}]`, d0, len(p0), d1, len(p1))
	put := func(id, body string) (int, []byte) {
		t.Helper()
		st, _, b := fx.c.do(t, 0, "PUT", cpPath("th", "/checkpoints/"+id), body, writer)
		return st, b
	}
	if st, b := put("c1", `{"data":{},"blob_versions":{"big":"1"},"blobs":[{"channel":"big","version":"1","type":"msgpack","chunks":`+chunks+`}]}`); st != 201 {
		t.Fatalf("put naming chunks: %d %s", st, b)
	}
	if st, b := put("c2", `{"parent_id":"c1","data":{},"blob_versions":{"big":"2"},"blobs":[{"channel":"big","version":"2","type":"msgpack","chunks":`+chunks+`}]}`); st != 201 {
		t.Fatalf("a child naming its parent's chunks under a new version: %d %s", st, b)
	}
	want := `"b64":"` + base64.StdEncoding.EncodeToString(value) + `"`
	for _, path := range []string{cpPath("th", "/checkpoints/c1"), cpPath("th", "/checkpoints"), "/v1/tenants/acme/checkpoints"} {
		st, _, b := fx.c.do(t, 0, "GET", path, nil, writer)
		if st != 200 || !strings.Contains(string(b), want) || !strings.Contains(string(b), d1) {
			t.Errorf("GET %s: %d %.300s", path, st, b)
		}
	}
	st, _, b := fx.c.do(t, 0, "GET", cpPath("th", "/checkpoints/latest"), nil, with(writer, "Accept", mediaMsgpack))
	if st != 200 {
		t.Fatalf("msgpack GET: %d %q", st, b)
	}
	if bl := mpDecode(t, b)["blobs"].([]any)[0].(map[string]any); !bytes.Equal(bl["b64"].([]byte), value) {
		t.Errorf("msgpack blob: %d bytes, want %d", len(bl["b64"].([]byte)), len(value))
	}

	secret := upload(adminAuth(), []byte("the launch codes"))
	if st, _, b := fx.c.do(t, 0, "POST", "/v1/tenants/acme/artifacts/secret/versions",
		fmt.Sprintf(`{"chunks":[{"digest":%q,"size":16}],"digest":%q,"size":16}`, secret, secret), adminAuth()); st != 201 {
		t.Fatalf("publish secret: %d %s", st, b)
	}
	missing := digestOf([]byte("never uploaded"))
	blob := func(extra string) string {
		return `{"parent_id":"c2","data":{},"blob_versions":{"big":"3"},"blobs":[{"channel":"big","version":"3","type":"msgpack"` + extra + `}]}`
	}
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"a chunk not held", blob(fmt.Sprintf(`,"chunks":[{"digest":%q,"size":14}]`, missing)), 400, "missing_chunks"},
		{"a chunk of an artifact it may not read", blob(fmt.Sprintf(`,"chunks":[{"digest":%q,"size":16}]`, secret)), 403, "forbidden"},
		{"bytes and chunks", blob(`,"b64":"AA==","chunks":` + chunks), 400, "invalid_argument"},
		{"no chunks", blob(`,"chunks":[]`), 400, "invalid_argument"},
	} {
		if st, b := put("c3", tc.body); st != tc.status || errorCode(b) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, st, b, tc.status, tc.code)
		}
	}
	if st, _, b := fx.c.do(t, 0, "GET", cpPath("th", "/checkpoints/c3"), nil, writer); st != 404 {
		t.Errorf("a refused put wrote c3: %d %s", st, b)
	}
}

// TestCheckpointBlobReadBudget: the values held in chunks that GETs and
// lists read whole into their answers are held from the node's budget
// (--max-blob-read-bytes) until the answer is written: with the budget
// taken, a read that needs some is 503 unavailable with Retry-After, and
// one that needs none is answered; once there is room again every read
// is answered, and each gives back what it held.
func TestCheckpointBlobReadBudget(t *testing.T) {
	fx := newAPIFixture(t)
	srv := fx.c.nodes[0].srv
	content := bytes.Repeat([]byte("value "), 1000)
	d := digestOf(content)
	if st, _, b := fx.c.do(t, 0, "PUT", "/v1/tenants/acme/chunks/"+d, content, adminAuth()); st != 201 {
		t.Fatalf("chunk upload: %d %s", st, b)
	}
	body := fmt.Sprintf(`{"data":{},"blob_versions":{"big":"1"},"blobs":[{"channel":"big","version":"1","type":"bytes","chunks":[{"digest":%q,"size":%d}]}]}`, d, len(content))
	if st, _, b := fx.c.do(t, 0, "PUT", cpPath("th", "/checkpoints/c1"), body, adminAuth()); st != 201 {
		t.Fatalf("put: %d %s", st, b)
	}
	if st, _, b := fx.c.do(t, 0, "PUT", cpPath("small", "/checkpoints/c1"), `{"data":{"n":1}}`, adminAuth()); st != 201 {
		t.Fatalf("put small: %d %s", st, b)
	}
	reads := []string{cpPath("th", "/checkpoints/c1"), cpPath("th", "/checkpoints"), "/v1/tenants/acme/checkpoints"}
	if !srv.blobReads.TryAcquire(srv.cfg.MaxBlobReadBytes) {
		t.Fatal("the budget is not free at the start")
	}
	for _, path := range reads {
		st, h, b := fx.c.do(t, 0, "GET", path, nil, adminAuth())
		if st != 503 || errorCode(b) != "unavailable" || h.Get("Retry-After") == "" || !strings.Contains(string(b), "--max-blob-read-bytes") {
			t.Errorf("GET %s with the budget taken: %d %s %s, want 503 unavailable with Retry-After", path, st, h.Get("Retry-After"), b)
		}
	}
	if st, _, b := fx.c.do(t, 0, "GET", cpPath("small", "/checkpoints/c1"), nil, adminAuth()); st != 200 {
		t.Errorf("GET of a checkpoint without values in chunks, the budget taken: %d %s, want 200", st, b)
	}
	srv.blobReads.Release(srv.cfg.MaxBlobReadBytes)
	want := `"b64":"` + base64.StdEncoding.EncodeToString(content) + `"`
	for _, path := range reads {
		for _, accept := range []string{"application/json", mediaMsgpack} {
			st, _, b := fx.c.do(t, 0, "GET", path, nil, with(adminAuth(), "Accept", accept))
			if st != 200 || (accept != mediaMsgpack && !strings.Contains(string(b), want)) || (accept == mediaMsgpack && !bytes.Contains(b, content)) {
				t.Errorf("GET %s (%s): %d %.200q, want 200 with the value", path, accept, st, b)
			}
		}
	}
	if !srv.blobReads.TryAcquire(srv.cfg.MaxBlobReadBytes) {
		t.Fatal("the reads did not give back what they held")
	}
	srv.blobReads.Release(srv.cfg.MaxBlobReadBytes)
}
