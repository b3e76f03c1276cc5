package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// storeModel is what a Store must behave like: one sorted map.
type storeModel map[string][]byte

func (m storeModel) scan(prefix, from string) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, prefix) && k >= from {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (m storeModel) digest() digestSum {
	var d digestSum
	for k, v := range m {
		d.add(pairHash(k, v))
	}
	return d
}

func storeScan(s *Store, prefix, from string, limit int) []string {
	var out []string
	s.Scan(prefix, from, func(k string, _ []byte) bool {
		out = append(out, k)
		return len(out) < limit
	})
	return out
}

// checkStore compares every observable of s with the model.
func checkStore(t *testing.T, step string, s *Store, m storeModel) {
	t.Helper()
	if s.Len() != len(m) {
		t.Fatalf("%s: Len %d, want %d", step, s.Len(), len(m))
	}
	if s.sum != m.digest() {
		t.Fatalf("%s: digest differs from the model's", step)
	}
	for k, v := range m {
		if got, ok := s.Get(k); !ok || !bytes.Equal(got, v) {
			t.Fatalf("%s: Get(%q) = %q, %v; want %q", step, k, got, ok, v)
		}
	}
	for _, p := range [][2]string{{"", ""}, {"i/", ""}, {"i", ""}, {"i/a/", ""}, {"ie/", ""}, {"t/", ""}, {"", "i/b"}, {"i/", "i/a/x5"}} {
		got, want := storeScan(s, p[0], p[1], 1<<30), m.scan(p[0], p[1])
		if !slices.Equal(got, want) {
			t.Fatalf("%s: Scan(%q, %q) = %v, want %v", step, p[0], p[1], got, want)
		}
		if len(want) > 3 { // a scan stopped early stops where the model says
			if got := storeScan(s, p[0], p[1], 3); !slices.Equal(got, want[:3]) {
				t.Fatalf("%s: Scan(%q, %q) stopped after 3 = %v, want %v", step, p[0], p[1], got, want[:3])
			}
		}
	}
}

// TestStoreHashedKeys: keys under "i/" live in a hash map, all others in
// the tree, and no method shows the difference: Get, Len, Scan order
// (merged, also when stopped early), the digest, rollback, and a clone that
// later writes to either side do not reach.
func TestStoreHashedKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	keys := []string{"h", "i", "i/", "ie/0001/i/a/x1", "ie/0002/i/b/y", "t/acme", "t/acme/p/w", "z"}
	for i := 0; i < 40; i++ {
		keys = append(keys, fmt.Sprintf("i/%c/x%d", 'a'+rune(i%3), i))
	}
	s, m := newStore(), storeModel{}
	var clones []*Store
	var models []storeModel
	for step := 0; step < 3000; step++ {
		k := keys[r.IntN(len(keys))]
		switch op := r.IntN(10); {
		case op < 6:
			v := []byte(fmt.Sprintf("v%d", step))
			s.Put(k, v)
			m[k] = v
		case op < 9:
			_, had := m[k]
			if got := s.Delete(k); got != had {
				t.Fatalf("step %d: Delete(%q) = %v, want %v", step, k, got, had)
			}
			delete(m, k)
		default: // a command that fails: its writes are undone
			before := copyModel(m)
			s.begin()
			for j := 0; j < 5; j++ {
				k := keys[r.IntN(len(keys))]
				if j%2 == 0 {
					s.Put(k, []byte("rolled back"))
				} else {
					s.Delete(k)
				}
			}
			s.abort()
			checkStore(t, fmt.Sprintf("step %d (after abort)", step), s, before)
		}
		if step%250 == 0 {
			clones = append(clones, s.clone())
			models = append(models, copyModel(m))
		}
		if step%100 == 0 {
			checkStore(t, fmt.Sprintf("step %d", step), s, m)
		}
	}
	checkStore(t, "end", s, m)
	for i, c := range clones {
		checkStore(t, fmt.Sprintf("clone %d", i), c, models[i])
	}
	// Writing to a clone does not reach the store it came from.
	c := s.clone()
	c.Put("i/a/only-in-clone", []byte("c"))
	c.Delete(keys[len(keys)-1])
	checkStore(t, "after the clone's writes", s, m)
}

func copyModel(m storeModel) storeModel {
	out := storeModel{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestSnapshotKeepsHashedKeysInOrder: a snapshot lists the hashed keys in
// key order among the others, as it did when every key was in the tree,
// and restores to the same state.
func TestSnapshotKeepsHashedKeysInOrder(t *testing.T) {
	f := New()
	applyOne(t, f, 1, tenantPut(1000, "acme"))
	for i := 0; i < 300; i++ {
		applyOne(t, f, uint64(2+i), idem(tenantPut(1000, "acme"), "", fmt.Sprintf("k%03d", (i*37)%300), "A", 60_000))
	}
	snap := persist(t, f)
	g := New()
	restoreFrom(t, g, snap) // Restore checks the order and the digest
	if a, b := f.Status().StateDigest, g.Status().StateDigest; a != b {
		t.Fatalf("digest: %s before, %s restored", a, b)
	}
	var got []string
	g.st.ascend(func(k string, _ []byte) bool {
		if strings.HasPrefix(k, "i/") {
			got = append(got, k)
		}
		return true
	})
	if len(got) != 300 || !slices.IsSorted(got) {
		t.Fatalf("restored idempotency records: %d, sorted %v", len(got), slices.IsSorted(got))
	}
	r := applyOne(t, g, 400, idem(tenantPut(1000, "acme"), "", "k123", "A", 60_000))
	if !r.Replay {
		t.Fatal("a restored record does not replay")
	}
}

// TestKeyFormats pins the hand-written key encoders to the fmt forms they
// replace: a different byte would move every key in a snapshot.
func TestKeyFormats(t *testing.T) {
	for _, v := range []int64{0, 1, 15, 16, 255, 1<<31 - 1, 1 << 40, -1, -2, math.MinInt64, math.MaxInt64} {
		if got, want := hex16(v), fmt.Sprintf("%016x", uint64(v)); got != want {
			t.Errorf("hex16(%d) = %q, want %q", v, got, want)
		}
		if got, want := prioKey(v), fmt.Sprintf("%016x", ^(uint64(v)^(1<<63))); got != want {
			t.Errorf("prioKey(%d) = %q, want %q", v, got, want)
		}
		if got, want := idemExpiryKey(v, "i/a/b/k"), fmt.Sprintf("ie/%016x/%s", uint64(v), "i/a/b/k"); got != want {
			t.Errorf("idemExpiryKey(%d) = %q, want %q", v, got, want)
		}
	}
	for _, tk := range []Task{
		{Tenant: "acme", Queue: "q", Status: "pending", Priority: -3, Seq: 77, ID: "t1"},
		{Tenant: "a", Queue: "research", Status: "running", Owner: "w", LeaseUntil: 1_700_000_000_123, ID: "task-9"},
		{Tenant: "a", Queue: "q", Status: "s", LeaseUntil: 5, ID: ""},
	} {
		var want string
		base := queuePrefix(tk.Tenant, tk.Queue, tk.Status)
		if tk.Owner == "" && tk.LeaseUntil == 0 {
			want = base + "r/" + fmt.Sprintf("%016x", ^(uint64(tk.Priority)^(1<<63))) + "/" + fmt.Sprintf("%016x", tk.Seq) + "/" + tk.ID
		} else {
			want = base + "l/" + fmt.Sprintf("%016x", uint64(tk.LeaseUntil)) + "/" + tk.ID
		}
		if got := tk.indexKey(); got != want {
			t.Errorf("indexKey(%+v) = %q, want %q", tk, got, want)
		}
	}
}

// TestPairHashBuffer: hashing through the store's buffer gives pairHash's
// sum, for pairs smaller and larger than the buffer it keeps.
func TestPairHashBuffer(t *testing.T) {
	var buf []byte
	for _, n := range []int{0, 1, 300, maxHashScratch + 1, 10} {
		val := bytes.Repeat([]byte{byte(n)}, n)
		h := sha256.New() // the digest's definition: SHA-256(len(key) as 8 bytes big-endian, key, value)
		h.Write([]byte{0, 0, 0, 0, 0, 0, 0, 1, 'k'})
		h.Write(val)
		var want digestSum
		for i, s := 0, h.Sum(nil); i < 4; i++ {
			want[i] = binary.BigEndian.Uint64(s[i*8:])
		}
		if got := pairHashBuf(&buf, "k", val); got != want {
			t.Errorf("value of %d bytes: %x, want %x", n, got, want)
		}
		if got := pairHash("k", val); got != want {
			t.Errorf("pairHash, value of %d bytes: %x, want %x", n, got, want)
		}
		if cap(buf) > maxHashScratch {
			t.Errorf("buffer grew to %d bytes", cap(buf))
		}
	}
}
