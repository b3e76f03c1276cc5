package einostore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/client/frameworks/einostore"
	"github.com/baton-dev/baton/client/frameworks/internal/batontest"
)

func newStore(t *testing.T, prefix string) *einostore.Store {
	t.Helper()
	s, err := einostore.New(admin, batontest.Tenant, einostore.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// uniqueID is a checkpoint id no other test uses.
func uniqueID(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestNewRefusesMissingArguments(t *testing.T) {
	if _, err := einostore.New(nil, "t", einostore.Options{}); err == nil {
		t.Error("New(nil client) succeeded")
	}
	if _, err := einostore.New(admin, "", einostore.Options{}); err == nil {
		t.Error("New with no tenant succeeded")
	}
}

func TestGetOfUnknownIDIsNotFound(t *testing.T) {
	b, ok, err := newStore(t, "").Get(testCtx(t), uniqueID(t))
	if err != nil || ok || b != nil {
		t.Fatalf("Get = %q, %v, %v; want nil, false, nil", b, ok, err)
	}
}

// TestRoundTrip: Get returns exactly the bytes Set stored, whether they
// travel as JSON or base64, inline or through the chunk store.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	bigJSON, _ := json.Marshal(map[string]string{"v": strings.Repeat("eino ", 150_000)}) // 750 KB
	cases := []struct {
		name string
		data []byte
		enc  string
	}{
		{"compact JSON", []byte(`{"a":1,"b":[true,null,"x"]}`), einostore.EncodingJSON},
		{"JSON with spaces", []byte(`{ "a": 1 }`), einostore.EncodingBase64},
		{"JSON with <>&", []byte(`{"a":"<b>&"}`), einostore.EncodingBase64},
		{"JSON with escaped <", []byte(`{"a":"\u003cb\u003e"}`), einostore.EncodingJSON},
		{"JSON null", []byte(`null`), einostore.EncodingJSON},
		{"JSON string", []byte(`"abc"`), einostore.EncodingJSON},
		{"JSON with a duplicate member", []byte(`{"a":1,"a":2}`), einostore.EncodingBase64},
		{"JSON with a lone surrogate", []byte(`["\udc00"]`), einostore.EncodingBase64},
		{"invalid UTF-8", []byte{'"', 0xff, '"'}, einostore.EncodingBase64},
		{"binary", random(4096), einostore.EncodingBase64},
		{"empty", []byte{}, einostore.EncodingBase64},
		{"large binary, in chunks", random(1 << 20), einostore.EncodingBase64},
		{"large JSON, in chunks", bigJSON, einostore.EncodingJSON},
	}
	s := newStore(t, "rt/")
	ctx := testCtx(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := uniqueID(t)
			if err := s.Set(ctx, id, tc.data); err != nil {
				t.Fatal(err)
			}
			got, ok, err := s.Get(ctx, id)
			if err != nil || !ok {
				t.Fatalf("Get = %v, %v", ok, err)
			}
			if !bytes.Equal(got, tc.data) {
				t.Fatalf("Get returned %d bytes (%.40q), Set stored %d (%.40q)", len(got), got, len(tc.data), tc.data)
			}
			cp, err := admin.LatestCheckpoint(ctx, batontest.Tenant, s.Thread(id))
			if err != nil {
				t.Fatal(err)
			}
			var md struct{ Source, Encoding string }
			if err := json.Unmarshal(cp.Metadata, &md); err != nil || md.Source != "eino" || md.Encoding != tc.enc {
				t.Fatalf("metadata = %s (%v), want source eino, encoding %s", cp.Metadata, err, tc.enc)
			}
		})
	}
}

// TestSetAppendsAtTheHead: each Set is a new checkpoint whose parent is
// the previous one, and Get reads the newest.
func TestSetAppendsAtTheHead(t *testing.T) {
	s, ctx, id := newStore(t, "chain/"), testCtx(t), uniqueID(t)
	for i := range 3 {
		if err := s.Set(ctx, id, fmt.Appendf(nil, `{"step":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err := s.Get(ctx, id)
	if err != nil || string(got) != `{"step":2}` {
		t.Fatalf("Get = %s, %v", got, err)
	}
	list, err := admin.ListCheckpoints(ctx, batontest.Tenant, s.Thread(id), client.ListCheckpointsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("%d checkpoints, want 3", len(list))
	}
	for i, cp := range list { // newest first
		want := ""
		if i+1 < len(list) {
			want = list[i+1].CheckpointID
		}
		if cp.ParentID != want {
			t.Errorf("checkpoint %d (%s) has parent %q, want %q", i, cp.Data, cp.ParentID, want)
		}
	}
}

// TestConcurrentSetsAllLand: writers racing on one id all succeed (the
// last one wins, as Eino expects), and the thread stays one chain.
func TestConcurrentSetsAllLand(t *testing.T) {
	ctx, id := testCtx(t), uniqueID(t)
	// A Set fails a put for each other writer's put that lands first, so
	// here at most 1 + 2*5 times before it lands: within Set's 16 tries.
	const writers, each = 3, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		s := newStore(t, "race/") // a Store each, as separate processes would have
		wg.Go(func() {
			for i := range each {
				errs <- s.Set(ctx, id, fmt.Appendf(nil, `{"w":%d,"i":%d}`, w, i))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := newStore(t, "race/")
	list, err := admin.ListCheckpoints(ctx, batontest.Tenant, s.Thread(id), client.ListCheckpointsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != writers*each {
		t.Fatalf("%d checkpoints, want %d", len(list), writers*each)
	}
	for i := 0; i+1 < len(list); i++ {
		if list[i].ParentID != list[i+1].CheckpointID {
			t.Fatalf("checkpoint %d's parent is %q, not the next older %q: the chain forked", i, list[i].ParentID, list[i+1].CheckpointID)
		}
	}
	got, _, err := s.Get(ctx, id)
	if err != nil || !bytes.Equal(got, list[0].Data) {
		t.Fatalf("Get = %s, %v; the head is %s", got, err, list[0].Data)
	}
}

// TestTooLargeIsRefusedWhole: past --max-checkpoint-bytes (2 MiB in these
// tests) Set fails with client.ErrTooLarge and a message naming the flag,
// and the previous checkpoint stays the latest.
func TestTooLargeIsRefusedWhole(t *testing.T) {
	s, ctx, id := newStore(t, "big/"), testCtx(t), uniqueID(t)
	if err := s.Set(ctx, id, []byte(`{"small":true}`)); err != nil {
		t.Fatal(err)
	}
	// 1.6 MiB of bytes are 2.1 MiB in base64: over the bound.
	err := s.Set(ctx, id, bytes.Repeat([]byte{0xfe}, 1600<<10))
	if !errors.Is(err, client.ErrTooLarge) || !strings.Contains(err.Error(), "--max-checkpoint-bytes") {
		t.Fatalf("Set of an oversized checkpoint = %v, want too_large naming --max-checkpoint-bytes", err)
	}
	got, _, err := s.Get(ctx, id)
	if err != nil || string(got) != `{"small":true}` {
		t.Fatalf("Get after the refused Set = %s, %v", got, err)
	}
	// Just under the bound, as JSON, it fits.
	fits, _ := json.Marshal(strings.Repeat("x", maxCheckpointBytes-64))
	if err := s.Set(ctx, id, fits); err != nil {
		t.Fatalf("Set of %d bytes of JSON: %v", len(fits), err)
	}
}

func TestDelete(t *testing.T) {
	s, ctx, id := newStore(t, "del/"), testCtx(t), uniqueID(t)
	if err := s.Delete(ctx, id); err != nil {
		t.Fatalf("Delete of an id never set: %v", err)
	}
	if err := s.Set(ctx, id, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get(ctx, id); ok || err != nil {
		t.Fatalf("Get after Delete = %v, %v", ok, err)
	}
}

// TestGetRefusesForeignCheckpoints: a thread written by something else
// (LangGraph, say) is not read as Eino's.
func TestGetRefusesForeignCheckpoints(t *testing.T) {
	s, ctx, id := newStore(t, "foreign/"), testCtx(t), uniqueID(t)
	if _, err := admin.PutCheckpoint(ctx, batontest.Tenant, s.Thread(id), "c1", client.PutCheckpointRequest{Data: json.RawMessage(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, id); err == nil || !strings.Contains(err.Error(), "not written by einostore") {
		t.Fatalf("Get of a foreign checkpoint = %v", err)
	}
}

// TestRetentionPolicyBoundsThreads: a keep_last policy on the store's
// prefix (docs/frameworks.md, Growth) keeps a thread to its newest
// checkpoints, and Get still reads the latest.
func TestRetentionPolicyBoundsThreads(t *testing.T) {
	ctx, id := testCtx(t), uniqueID(t)
	if _, err := admin.SetCheckpointPolicy(ctx, batontest.Tenant, client.CheckpointPolicy{Prefix: "kept/", KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, "kept/")
	for i := range 5 {
		if err := s.Set(ctx, id, fmt.Appendf(nil, `{"step":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	list, err := admin.ListCheckpoints(ctx, batontest.Tenant, s.Thread(id), client.ListCheckpointsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Fatalf("%d checkpoints kept, want 2", len(list))
	}
	got, _, err := s.Get(ctx, id)
	if err != nil || string(got) != `{"step":4}` {
		t.Fatalf("Get = %s, %v", got, err)
	}
}

// TestInvalidIDIsAnError: an id that makes no thread id (over 256 bytes
// with the prefix, or with a control character) fails Get and Set with
// invalid_argument, rather than reading as "no checkpoint".
func TestInvalidIDIsAnError(t *testing.T) {
	s, ctx := newStore(t, "bad/"), testCtx(t)
	for _, id := range []string{strings.Repeat("x", 253), "tab\there"} {
		if _, ok, err := s.Get(ctx, id); !errors.Is(err, client.ErrInvalidArgument) || ok {
			t.Errorf("Get(%.20q) = %v, %v; want invalid_argument", id, ok, err)
		}
		if err := s.Set(ctx, id, []byte(`{}`)); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("Set(%.20q) = %v; want invalid_argument", id, err)
		}
	}
	// 252 bytes and the prefix's 4 are the most a thread id may be.
	if err := s.Set(ctx, strings.Repeat("x", 252), []byte(`{}`)); err != nil {
		t.Fatalf("Set of a 256-byte thread id: %v", err)
	}
}

// TestGrants: docs/frameworks.md's grant, checkpoints read and write on
// the prefix, is enough for Get and Set, a checkpoint large enough for the
// chunk store included; Delete takes delete too; other threads are
// refused.
func TestGrants(t *testing.T) {
	ctx, id := testCtx(t), uniqueID(t)
	p, err := admin.CreatePrincipal(ctx, batontest.Tenant, "eino-"+fmt.Sprint(time.Now().UnixNano()),
		[]client.Grant{{Resource: "checkpoints", Prefix: "granted/", Actions: []string{"read", "write"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Config{Endpoints: testCluster.Endpoints(), Token: p.Token, CAFile: testCluster.CAFile()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := einostore.New(c, batontest.Tenant, einostore.Options{Prefix: "granted/"})
	if err != nil {
		t.Fatal(err)
	}
	// Over 512 KiB in base64: chunks. Random, so that no other thread's
	// checkpoint holds them (a principal may not name those: docs/api.md).
	large := make([]byte, 700<<10)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for i := range large {
		large[i] = byte(rng.UintN(256))
	}
	for _, data := range [][]byte{[]byte(`{"a":1}`), large} {
		if err := s.Set(ctx, id, data); err != nil {
			t.Fatalf("Set of %d bytes under the grant: %v", len(data), err)
		}
		if got, _, err := s.Get(ctx, id); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get under the grant: %d bytes, %v", len(got), err)
		}
	}
	if err := s.Delete(ctx, id); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("Delete without a delete grant = %v, want forbidden", err)
	}
	other, err := einostore.New(c, batontest.Tenant, einostore.Options{Prefix: "other/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Get(ctx, id); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("Get outside the grant = %v, want forbidden", err)
	}
	if err := other.Set(ctx, id, []byte(`{}`)); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("Set outside the grant = %v, want forbidden", err)
	}
}
