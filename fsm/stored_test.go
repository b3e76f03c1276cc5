package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// checkStored: v's stored form gives v back, by unpackVal and by
// appendUnpacked; a value that starts with storedTag is escaped.
func checkStored(t *testing.T, v []byte) []byte {
	t.Helper()
	s := packVal(v)
	if got := unpackVal(s); !bytes.Equal(got, v) || (got == nil) != (v == nil) {
		t.Fatalf("unpackVal(packVal(%x)) = %x", v, got)
	}
	if got := appendUnpacked([]byte("prefix"), s); !bytes.Equal(got, append([]byte("prefix"), v...)) {
		t.Fatalf("appendUnpacked(packVal(%x)) = %x", v, got)
	}
	if (v != nil && len(v) == 0 || len(v) > 0 && v[0] == storedTag) && !bytes.Equal(s, append([]byte{storedTag, storedEscaped}, v...)) {
		t.Fatalf("packVal(%x) = %x: not escaped", v, s)
	}
	return s
}

// TestStoredForm: every task record appendTask writes is kept without its
// field names and comes back byte for byte; every other value comes back
// as it was.
func TestStoredForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range rounds(2000) {
		v := encode(randTask(rng))
		s := checkStored(t, v)
		if len(s) < 2 || s[0] != storedTag || s[1] != storedTask || len(s) != len(v)-taskNamesLen+2 || cap(s) != len(s) {
			t.Fatalf("task record %x stored as %x", v, s)
		}
		var fromStored, fromRecord Task
		if !decodeStoredTask(s, &fromStored) || decodeTask(v, &fromRecord) != nil || !reflect.DeepEqual(fromStored, fromRecord) {
			t.Fatalf("task record %x: from the stored form %+v, from the record %+v", v, fromStored, fromRecord)
		}
	}
	rec := encode(randIdemRecord(rng))
	task := encode(randTask(rng))
	for _, v := range [][]byte{nil, {}, {0}, {storedTag}, {storedTag, storedTask}, {storedTag, storedEscaped, 1},
		append([]byte{storedTag}, task...), rec, {0xde}, {0xde, 0, taskFields},
		task[:len(task)-1], append(task[:len(task):len(task)], 0), // a byte short, a byte over
		bytes.Replace(task, []byte("Seq"), []byte("Sex"), 1), // another field name
		encode(&KVEntry{Key: "k", Value: []byte(`1`)})} {
		s := checkStored(t, v)
		if len(s) > 1 && s[0] == storedTag && s[1] == storedTask {
			t.Fatalf("%x is not a task record, but it was stored as one", v)
		}
		if len(v) > 0 && v[0] != storedTag && &s[0] != &v[0] {
			t.Fatalf("%x was copied to be stored", v)
		}
	}
}

// TestStoreStoredValues: a Store holding task records and values that
// need escaping, in the tree and in the hash maps, through writes,
// rollbacks and a snapshot, shows only the values as given: Get, Scan,
// the digest, the snapshot.
func TestStoreStoredValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	vals := [][]byte{nil, {}, {storedTag}, {storedTag, storedTask, 1}, []byte("plain"), encode(randIdemRecord(rng))}
	for range 8 {
		vals = append(vals, encode(randTask(rng)))
	}
	keys := []string{"t/a/task/1", "t/a/task/2", "t/a/q/x", "i/a/p/k1", "i/a/p/k2", "z"}
	s, m := newStore(), storeModel{}
	for step := range rounds(3000) {
		k := keys[rng.IntN(len(keys))]
		abort := rng.IntN(4) == 0
		s.begin()
		before := copyModel(m)
		if rng.IntN(3) == 0 {
			s.Delete(k)
			delete(m, k)
		} else {
			v := vals[rng.IntN(len(vals))]
			s.Put(k, v)
			m[k] = v
		}
		if abort {
			s.abort()
			m = before
		} else {
			s.commit()
		}
		checkStore(t, fmt.Sprint("step ", step), s, m)
		s.ascend(func(k string, v []byte) bool {
			if !bytes.Equal(v, m[k]) {
				t.Fatalf("step %d: Scan gave %q = %x, want %x", step, k, v, m[k])
			}
			return true
		})
	}
	var buf bytes.Buffer
	if err := (&snapshot{st: s}).write(&buf); err != nil {
		t.Fatal(err)
	}
	back, _, err := readSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, "restored", back, m)
}
