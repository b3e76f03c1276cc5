package fsm

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
)

// hashedPrefix is the key prefix the Store keeps in a hash map instead of
// the tree: idempotency records. Every write command looks one up by a
// random key and most store one, and in a tree of a few hundred thousand
// keys each such lookup or insert is a walk of cache misses (in a profile
// of a follower under fenced updates, 30% of its CPU). Nothing reads them
// in key order but a snapshot, which sorts them then. The expiry index
// (ie/...) stays in the tree: it is read in order, and its inserts are at
// its end.
const hashedPrefix = "i/"

// hashedShards is how many maps the hashed keys are spread over; a
// snapshot shares them all and a later write copies only its own.
const hashedShards = 256

var (
	hashedSeed = maphash.MakeSeed() // placement only: never observable
	hashedGens atomic.Uint64
)

// hashed is a copy-on-write hash map from key to value. A clone shares
// every shard; a shard made in an older generation than its hashed's is
// shared and is copied before a write. Reads never copy.
type hashed struct {
	gen    uint64
	n      int
	shards [hashedShards]*hashedShard
}

type hashedShard struct {
	gen uint64
	m   map[string][]byte
}

func newHashed() *hashed { return &hashed{gen: hashedGens.Add(1)} }

func shardOf(key string) int { return int(maphash.String(hashedSeed, key) % hashedShards) }

func (h *hashed) get(key string) ([]byte, bool) {
	sh := h.shards[shardOf(key)]
	if sh == nil {
		return nil, false
	}
	v, ok := sh.m[key]
	return v, ok
}

// put sets key and returns the previous value, if any.
func (h *hashed) put(key string, val []byte) ([]byte, bool) {
	sh := h.writable(shardOf(key))
	old, existed := sh.m[key]
	sh.m[key] = val
	if !existed {
		h.n++
	}
	return old, existed
}

// del removes key and returns its value, if it was there.
func (h *hashed) del(key string) ([]byte, bool) {
	i := shardOf(key)
	if sh := h.shards[i]; sh == nil {
		return nil, false
	} else if _, ok := sh.m[key]; !ok {
		return nil, false
	}
	sh := h.writable(i)
	old := sh.m[key]
	delete(sh.m, key)
	h.n--
	return old, true
}

// writable returns shard i, copied first if it is shared.
func (h *hashed) writable(i int) *hashedShard {
	sh := h.shards[i]
	switch {
	case sh == nil:
		sh = &hashedShard{gen: h.gen, m: map[string][]byte{}}
		h.shards[i] = sh
	case sh.gen != h.gen:
		sh = &hashedShard{gen: h.gen, m: maps.Clone(sh.m)}
		h.shards[i] = sh
	}
	return sh
}

// clone returns a copy sharing every shard. Both go on in new generations,
// so whichever writes a shard first copies it.
func (h *hashed) clone() *hashed {
	c := &hashed{gen: hashedGens.Add(1), n: h.n, shards: h.shards}
	h.gen = hashedGens.Add(1)
	return c
}

// sorted returns the items whose keys have prefix and are >= from, in key
// order.
func (h *hashed) sorted(prefix, from string) []kv {
	var out []kv
	for _, sh := range h.shards {
		if sh == nil {
			continue
		}
		for k, v := range sh.m {
			if strings.HasPrefix(k, prefix) && k >= from {
				out = append(out, kv{key: k, val: v})
			}
		}
	}
	slices.SortFunc(out, func(a, b kv) int { return strings.Compare(a.key, b.key) })
	return out
}

// isHashed reports whether key lives in the hash map.
func isHashed(key string) bool { return strings.HasPrefix(key, hashedPrefix) }

// mayHoldHashed reports whether keys with prefix can be hashed keys.
func mayHoldHashed(prefix string) bool {
	return strings.HasPrefix(prefix, hashedPrefix) || strings.HasPrefix(hashedPrefix, prefix)
}
