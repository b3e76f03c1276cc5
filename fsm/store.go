package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"

	"github.com/google/btree"
)

// item is one key/value pair of the state.
type item struct {
	key string
	val []byte
}

func itemLess(a, b item) bool { return a.key < b.key }

// digestSum is an additive multiset hash: the sum, lane by lane modulo 2^64,
// of SHA-256(key, value) over every pair. Adding and removing a pair are O(1)
// and the result does not depend on the order of writes.
type digestSum [4]uint64

func pairHash(key string, val []byte) digestSum {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(key)))
	h.Write(n[:])
	h.Write([]byte(key))
	h.Write(val)
	var sum [32]byte
	h.Sum(sum[:0])
	var d digestSum
	for i := range d {
		d[i] = binary.BigEndian.Uint64(sum[i*8:])
	}
	return d
}

func (d *digestSum) add(o digestSum) {
	for i := range d {
		d[i] += o[i]
	}
}

func (d *digestSum) sub(o digestSum) {
	for i := range d {
		d[i] -= o[i]
	}
}

// Store is the ordered key/value state of the FSM. It is not safe for
// concurrent use; the FSM serializes access.
type Store struct {
	tree *btree.BTreeG[item]
	sum  digestSum
}

// checkpoint is a point-in-time copy of a Store (O(1), copy-on-write).
type checkpoint struct {
	tree *btree.BTreeG[item]
	sum  digestSum
}

func newStore() *Store {
	return &Store{tree: btree.NewG(32, itemLess)}
}

// Get returns the value at key.
func (s *Store) Get(key string) ([]byte, bool) {
	it, ok := s.tree.Get(item{key: key})
	return it.val, ok
}

// Put sets key to val. val must not be modified afterwards.
func (s *Store) Put(key string, val []byte) {
	if old, ok := s.tree.ReplaceOrInsert(item{key: key, val: val}); ok {
		s.sum.sub(pairHash(old.key, old.val))
	}
	s.sum.add(pairHash(key, val))
}

// Delete removes key; it reports whether it existed.
func (s *Store) Delete(key string) bool {
	old, ok := s.tree.Delete(item{key: key})
	if ok {
		s.sum.sub(pairHash(old.key, old.val))
	}
	return ok
}

// Len is the number of keys.
func (s *Store) Len() int { return s.tree.Len() }

// Scan calls fn for each key with the prefix, in key order, starting at the
// first key >= from (from may be ""), until fn returns false.
func (s *Store) Scan(prefix, from string, fn func(key string, val []byte) bool) {
	start := prefix
	if from > start {
		start = from
	}
	s.tree.AscendGreaterOrEqual(item{key: start}, func(it item) bool {
		if !strings.HasPrefix(it.key, prefix) {
			return false
		}
		return fn(it.key, it.val)
	})
}

func (s *Store) checkpoint() checkpoint {
	return checkpoint{tree: s.tree.Clone(), sum: s.sum}
}

func (s *Store) rollback(cp checkpoint) {
	s.tree = cp.tree
	s.sum = cp.sum
}

// clone returns an independent Store sharing structure copy-on-write.
func (s *Store) clone() *Store {
	return &Store{tree: s.tree.Clone(), sum: s.sum}
}
