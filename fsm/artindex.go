package fsm

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/google/btree"
)

// artIndex is what the artifact life commands (artifactlife.go) look up
// instead of scanning: how many versions each artifact name has, which
// versions have each artifact id, and which refs point at each id. It is derived from the keys, in memory,
// not stored, and kept by the Store itself: put and Delete note every write
// of a version or ref key (the undo of a failed command included, since
// abort writes through them), and a restore rebuilds it as readSnapshot
// puts each key. So it follows rollbacks and restores exactly, like the
// Store's usage counts, and needs no new record, entry version or snapshot
// format: a member without it reads the same keys and decides the same way.
// Stored instead, it would be a record written by every ref.set, which a
// member that predates it would apply without writing, and the two would
// differ in state and digest.
//
// It is not copied into clones (a snapshot's clone only writes itself
// out). TestArtIndexMatchesState holds the kept index to one rebuilt from
// the keys after random logs.
type artIndex struct {
	// versions counts the version keys of each name: tenant\x00name.
	versions map[string]int
	// ids holds tenant\x00artifact id\x00<version, 16 hex> for every
	// version (an id names one name: the name is part of what it hashes).
	ids *btree.BTreeG[string]
	// refs holds tenant\x00artifact id\x00ref for every ref, and refCount
	// how many refs point at each tenant\x00artifact id.
	refs     *btree.BTreeG[string]
	refCount map[string]int
}

func newArtIndex() *artIndex {
	less := func(a, b string) bool { return a < b }
	return &artIndex{versions: map[string]int{}, ids: btree.NewG(16, less), refs: btree.NewG(16, less), refCount: map[string]int{}}
}

// artKeyKind tells which of the indexed keys key is:
// t/<tenant>/art/<name>/v/<version> (kind 'v', rest the name, ver the
// version's 16 hex) or t/<tenant>/ref/<ref> (kind 'r', rest the ref).
func artKeyKind(key string) (kind byte, tenant, rest, ver string) {
	if len(key) < 2 || key[0] != 't' || key[1] != '/' {
		return 0, "", "", ""
	}
	tenant, after, ok := strings.Cut(key[2:], "/")
	if !ok {
		return 0, "", "", ""
	}
	if r, ok := strings.CutPrefix(after, "ref/"); ok {
		return 'r', tenant, r, ""
	}
	if r, ok := strings.CutPrefix(after, "art/"); ok {
		// <name>/v/<version>; a name has no "/".
		if name, v, ok := strings.Cut(r, "/"); ok && strings.HasPrefix(v, "v/") {
			return 'v', tenant, name, v[2:]
		}
	}
	return 0, "", "", ""
}

// note records that key went from old to val (values as given; existed
// and exists say whether there was and is one).
func (x *artIndex) note(key string, old []byte, existed bool, val []byte, exists bool) {
	kind, tenant, rest, ver := artKeyKind(key)
	switch kind {
	case 'v':
		k := tenant + "\x00" + rest
		if existed {
			if x.versions[k]--; x.versions[k] <= 0 {
				delete(x.versions, k)
			}
			if id, ok := manifestID(old); ok {
				x.ids.Delete(tenant + "\x00" + id + "\x00" + ver)
			}
		}
		if exists {
			x.versions[k]++
			if id, ok := manifestID(val); ok {
				x.ids.ReplaceOrInsert(tenant + "\x00" + id + "\x00" + ver)
			}
		}
	case 'r':
		if existed {
			x.dropRef(tenant, rest, old)
		}
		if exists {
			x.addRef(tenant, rest, val)
		}
	}
}

// manifestID is the artifact id of an encoded Manifest. The codec writes
// a struct as a map with sorted names (Canonical), so artifact_id comes
// first: read straight from the bytes, a version's id costs nothing however
// many chunks follow it. Any other shape is decoded whole.
func manifestID(v []byte) (string, bool) {
	if id, _, ok := manifestIDFront(v); ok {
		return id, true
	}
	var m Manifest
	if decode(v, &m) != nil {
		return "", false
	}
	return m.ArtifactID, true
}

// manifestHead is the artifact id of an encoded Manifest and how many
// chunks it names, read from its front like manifestID: chunks is the
// name after artifact_id, and its array header says how many follow.
// Any other shape is decoded whole.
func manifestHead(v []byte) (id string, chunks int, ok bool) {
	if id, p, ok := manifestIDFront(v); ok {
		const key = "\xa6chunks" // the name as a fixstr of 6 bytes
		if p, ok := bytes.CutPrefix(p, []byte(key)); ok && len(p) > 0 {
			switch {
			case p[0] == 0xc0: // nil
				return id, 0, true
			case p[0]&0xf0 == 0x90: // fixarray
				return id, int(p[0] & 0x0f), true
			case p[0] == 0xdc && len(p) >= 3: // array 16
				return id, int(binary.BigEndian.Uint16(p[1:3])), true
			case p[0] == 0xdd && len(p) >= 5: // array 32
				return id, int(binary.BigEndian.Uint32(p[1:5])), true
			}
		}
	}
	var m Manifest
	if decode(v, &m) != nil {
		return "", 0, false
	}
	return m.ArtifactID, len(m.Chunks), true
}

// manifestIDFront reads artifact_id, the first name of an encoded
// Manifest, and returns it with the bytes after it; false when the shape
// is not the expected one.
func manifestIDFront(v []byte) (string, []byte, bool) {
	const key = "\xabartifact_id" // the name as a fixstr of 11 bytes
	var p []byte
	switch {
	case len(v) > 0 && v[0]&0xf0 == 0x80: // fixmap
		p = v[1:]
	case len(v) > 2 && v[0] == 0xde: // map 16
		p = v[3:]
	}
	if p, ok := bytes.CutPrefix(p, []byte(key)); ok && len(p) > 0 {
		var n, at int
		switch {
		case p[0]&0xe0 == 0xa0: // fixstr
			n, at = int(p[0]&0x1f), 1
		case p[0] == 0xd9 && len(p) > 1: // str 8
			n, at = int(p[1]), 2
		}
		if at > 0 && len(p) >= at+n {
			return string(p[at : at+n]), p[at+n:], true
		}
	}
	return "", nil, false
}

func refArtifactID(v []byte) (string, bool) {
	var r Ref
	if decode(v, &r) != nil {
		return "", false
	}
	return r.ArtifactID, true
}

func (x *artIndex) addRef(tenant, ref string, v []byte) {
	id, ok := refArtifactID(v)
	if !ok {
		return
	}
	if _, had := x.refs.ReplaceOrInsert(tenant + "\x00" + id + "\x00" + ref); !had {
		x.refCount[tenant+"\x00"+id]++
	}
}

func (x *artIndex) dropRef(tenant, ref string, v []byte) {
	id, ok := refArtifactID(v)
	if !ok {
		return
	}
	if _, had := x.refs.Delete(tenant + "\x00" + id + "\x00" + ref); had {
		k := tenant + "\x00" + id
		if x.refCount[k]--; x.refCount[k] <= 0 {
			delete(x.refCount, k)
		}
	}
}

// newestWithID is the newest version that has id, 0 if none.
func (x *artIndex) newestWithID(tenant, id string) uint64 {
	prefix := tenant + "\x00" + id + "\x00"
	var v uint64
	x.ids.DescendLessOrEqual(prefix+"\xff", func(k string) bool {
		if strings.HasPrefix(k, prefix) {
			v, _ = strconv.ParseUint(k[len(prefix):], 16, 64)
		}
		return false
	})
	return v
}

// versionCount is how many versions name has.
func (x *artIndex) versionCount(tenant, name string) int { return x.versions[tenant+"\x00"+name] }

// pinned reports whether a ref points at id.
func (x *artIndex) pinned(tenant, id string) bool { return x.refCount[tenant+"\x00"+id] > 0 }

// refsTo is how many refs point at id, and the names of the first max of
// them in name order.
func (x *artIndex) refsTo(tenant, id string, max int) (int, []string) {
	n := x.refCount[tenant+"\x00"+id]
	if n == 0 {
		return 0, nil
	}
	prefix := tenant + "\x00" + id + "\x00"
	var names []string
	x.refs.AscendGreaterOrEqual(prefix, func(k string) bool {
		if !strings.HasPrefix(k, prefix) || len(names) == max {
			return false
		}
		names = append(names, k[len(prefix):])
		return true
	})
	return n, names
}
