package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/google/btree"
)

// item is one key/value pair of the tree: p points to the key's klen
// bytes followed by the stored form (stored.go) of the value, vlen bytes,
// one allocation that is never modified. 16 bytes instead of a string and
// a slice header (40), in every node of the tree; and one allocation per
// pair instead of two. A search item (searchItem) points into its key.
type item struct {
	p    *byte
	klen uint32
	vlen uint32
}

// newItem makes the item of key and the value whose stored form is sv.
func newItem(key string, sv []byte) item {
	b := make([]byte, len(key)+len(sv))
	copy(b[copy(b, key):], sv)
	return itemOf(b, len(key))
}

// newItemOf makes the item of key and val (a value as given), writing
// the stored form straight into the item's allocation.
func newItemOf(key string, val []byte) item {
	n, task := storedLen(val)
	b := make([]byte, len(key), len(key)+n)
	copy(b, key)
	return itemOf(appendStored(b, val, task), len(key))
}

// itemOf is the item of b, a key of klen bytes then a stored value.
func itemOf(b []byte, klen int) item {
	if klen > math.MaxUint32 || len(b)-klen > math.MaxUint32 {
		panic("fsm: a key or value of 4 GiB or more")
	}
	if len(b) == 0 {
		return item{}
	}
	return item{p: &b[0], klen: uint32(klen), vlen: uint32(len(b) - klen)}
}

// searchItem is an item that only has a key, for lookups.
func searchItem(key string) item {
	return item{p: unsafe.StringData(key), klen: uint32(len(key))}
}

func (it item) key() string { return unsafe.String(it.p, it.klen) }

// stored returns the value's stored form (nil when it is empty), which
// must not be modified.
func (it item) stored() []byte {
	if it.vlen == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(it.p), it.klen)), it.vlen)
}

func itemLess(a, b item) bool { return a.key() < b.key() }

// digestSum is an additive multiset hash: the sum, lane by lane modulo 2^64,
// of SHA-256(key, value) over every pair. Adding and removing a pair are O(1)
// and the result does not depend on the order of writes.
type digestSum [4]uint64

func pairHash(key string, val []byte) digestSum {
	return pairHashBuf(nil, key, val)
}

// pairHashBuf is pairHash hashing through buf, which it may grow: the
// store keeps one so that hashing a pair allocates nothing.
func pairHashBuf(buf *[]byte, key string, val []byte) digestSum {
	return pairHashStored(buf, key, val, false)
}

// pairHashStored is pairHashBuf of the value whose stored form is val
// (stored.go) when stored is set.
func pairHashStored(buf *[]byte, key string, val []byte, stored bool) digestSum {
	var b []byte
	if buf != nil {
		b = (*buf)[:0]
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(key)))
	b = append(b, key...)
	if stored {
		b = appendUnpacked(b, val)
	} else {
		b = append(b, val...)
	}
	sum := sha256.Sum256(b)
	if buf != nil && cap(b) <= maxHashScratch {
		*buf = b
	}
	var d digestSum
	for i := range d {
		d[i] = binary.BigEndian.Uint64(sum[i*8:])
	}
	return d
}

// maxHashScratch bounds the buffer a Store keeps for hashing; a larger
// pair (a big KV value, say) uses a buffer of its own.
const maxHashScratch = 64 << 10

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
// concurrent use; the FSM serializes access. It keeps values in a stored
// form of its own (stored.go); every method takes and returns them as
// given.
type Store struct {
	tree *btree.BTreeG[item]
	// hashed holds the keys under hashedPrefix instead of the tree; every
	// method but the hash-map ones sees one ordered set of keys.
	hashed *hashed
	sum    digestSum
	// hashBuf is pairHashBuf's buffer (not shared with clones).
	hashBuf []byte
	// undo, while a command runs, records how to reverse each write.
	undo      []undoOp
	recording bool
	// use counts the data for quotas (usage.go): derived from the keys,
	// kept up to date by Put and Delete (an abort's writes included), not
	// copied into clones.
	use usage
	// arts is the artifact life's index (artindex.go): derived from the
	// keys like use, kept by put and Delete, nil in clones.
	arts *artIndex
	// reads, when a test sets it, counts the keys Get, Has and Scan read:
	// tests of bounded work (bounds_test.go) count with it. Nil otherwise.
	reads *atomic.Int64
}

// undoOp restores key to val, a stored form (or deletes it when
// !existed).
type undoOp struct {
	key     string
	val     []byte
	existed bool
}

// kv is a key and a value's stored form.
type kv struct {
	key string
	val []byte
}

func newStore() *Store {
	return &Store{tree: btree.NewG(32, itemLess), hashed: newHashed(), arts: newArtIndex()}
}

// read counts one key read, for tests (reads).
func (s *Store) read() {
	if s.reads != nil {
		s.reads.Add(1)
	}
}

// Get returns the value at key.
func (s *Store) Get(key string) ([]byte, bool) {
	s.read()
	if isHashed(key) {
		v, ok := s.hashed.get(key)
		return unpackVal(v), ok
	}
	it, ok := s.tree.Get(searchItem(key))
	return unpackVal(it.stored()), ok
}

// Has reports whether key is set.
func (s *Store) Has(key string) bool {
	s.read()
	if isHashed(key) {
		_, ok := s.hashed.get(key)
		return ok
	}
	return s.tree.Has(searchItem(key))
}

// Put sets key to val. val must not be modified afterwards.
func (s *Store) Put(key string, val []byte) {
	if isHashed(key) {
		s.put(key, packVal(val), item{}, false)
		return
	}
	it := newItemOf(key, val)
	s.put(key, it.stored(), it, true)
}

// put sets key to the value whose stored form is val; it is its item
// when made.
func (s *Store) put(key string, val []byte, it item, made bool) {
	var old []byte
	var existed bool
	if isHashed(key) {
		old, existed = s.hashed.put(key, val)
	} else {
		if !made {
			it = newItem(key, val)
		}
		it, existed = s.tree.ReplaceOrInsert(it)
		old = it.stored()
	}
	if existed {
		s.sum.sub(pairHashStored(&s.hashBuf, key, old, true))
		s.use.add(key, int64(len(val)-len(old)), 0)
	} else {
		s.use.add(key, int64(len(key)+len(val)), 1)
	}
	s.sum.add(pairHashStored(&s.hashBuf, key, val, true))
	s.noteArts(key, old, existed, val, true)
	s.record(key, old, existed)
}

// noteArts passes a write of an artifact version or ref key to the
// artifact index (values in stored form).
func (s *Store) noteArts(key string, old []byte, existed bool, val []byte, exists bool) {
	if s.arts == nil {
		return
	}
	if kind, _, _, _ := artKeyKind(key); kind != 0 {
		s.arts.note(key, unpackVal(old), existed, unpackVal(val), exists)
	}
}

// Delete removes key; it reports whether it existed.
func (s *Store) Delete(key string) bool {
	var old []byte
	var ok bool
	if isHashed(key) {
		old, ok = s.hashed.del(key)
	} else {
		var it item
		it, ok = s.tree.Delete(searchItem(key))
		old = it.stored()
	}
	if ok {
		s.sum.sub(pairHashStored(&s.hashBuf, key, old, true))
		s.use.add(key, -int64(len(key)+len(old)), -1)
		s.noteArts(key, old, true, nil, false)
		s.record(key, old, true)
	}
	return ok
}

func (s *Store) record(key string, old []byte, existed bool) {
	if s.recording {
		s.undo = append(s.undo, undoOp{key: key, val: old, existed: existed})
	}
}

// Len is the number of keys.
func (s *Store) Len() int { return s.tree.Len() + s.hashed.n }

// Scan calls fn for each key with the prefix, in key order, starting at the
// first key >= from (from may be ""), until fn returns false.
func (s *Store) Scan(prefix, from string, fn func(key string, val []byte) bool) {
	start := prefix
	if from > start {
		start = from
	}
	var hashed []kv // sorted, when the range can hold hashed keys
	if mayHoldHashed(prefix) {
		hashed = s.hashed.sorted(prefix, start)
	}
	more := true
	s.tree.AscendGreaterOrEqual(searchItem(start), func(it item) bool {
		key := it.key()
		if !strings.HasPrefix(key, prefix) {
			return false
		}
		for len(hashed) > 0 && hashed[0].key < key && more {
			s.read()
			more = fn(hashed[0].key, unpackVal(hashed[0].val))
			hashed = hashed[1:]
		}
		if more {
			s.read()
			more = fn(key, unpackVal(it.stored()))
		}
		return more
	})
	for len(hashed) > 0 && more {
		s.read()
		more = fn(hashed[0].key, unpackVal(hashed[0].val))
		hashed = hashed[1:]
	}
}

// ascend calls fn for every key in key order until it returns false.
func (s *Store) ascend(fn func(key string, val []byte) bool) { s.Scan("", "", fn) }

// begin starts recording the writes of one command, so that abort can
// reverse them: every command applies completely or not at all.
func (s *Store) begin() {
	s.undo = s.undo[:0]
	s.recording = true
}

// commit keeps the command's writes.
func (s *Store) commit() { s.recording = false }

// abort reverses the command's writes, newest first, digest included.
func (s *Store) abort() {
	s.recording = false
	for i := len(s.undo) - 1; i >= 0; i-- {
		u := s.undo[i]
		if u.existed {
			s.put(u.key, u.val, item{}, false)
		} else {
			s.Delete(u.key)
		}
	}
	s.undo = s.undo[:0]
}

// clone returns an independent Store sharing structure copy-on-write.
func (s *Store) clone() *Store {
	return &Store{tree: s.tree.Clone(), hashed: s.hashed.clone(), sum: s.sum}
}

// lastKey is the greatest key with prefix, read in O(log n). prefix must
// end in a byte below 0xff and hold no hashed key.
func (s *Store) lastKey(prefix string) (string, bool) {
	if prefix == "" || prefix[len(prefix)-1] == 0xff || mayHoldHashed(prefix) {
		panic("fsm: lastKey of " + prefix)
	}
	// Every key with the prefix is below the prefix with its last byte
	// one higher, which itself has not the prefix.
	bound := prefix[:len(prefix)-1] + string([]byte{prefix[len(prefix)-1] + 1})
	key, ok := "", false
	s.tree.DescendLessOrEqual(searchItem(bound), func(it item) bool {
		k := it.key()
		if k == bound {
			return true // the bound itself: look below it
		}
		if strings.HasPrefix(k, prefix) {
			key, ok = k, true
		}
		return false
	})
	if ok {
		s.read()
	}
	return key, ok
}
