package fsm

import (
	"bytes"
	"encoding/binary"
)

// The Store keeps each value in a stored form that only it sees; every
// method takes and returns values as given (the canonical form), and the
// digest, snapshots and Scan see only those, so replicas, snapshots and
// digests are the same as when values were kept as given.
//
// A task record (what appendTask writes: a map of Task's 16 fields by
// name) is kept without its field names, which are the same in every
// record: 128 of its 238 bytes in the scale workload's records. Other
// values are kept as given, except one that starts with storedTag, which
// gets a two-byte prefix, and an empty one that is not nil (the tree's
// items keep no empty value apart from nil). So:
//
//	storedTag, storedTask, the 16 field values     a task record
//	storedTag, storedEscaped, the value            a value starting with storedTag, or empty
//	nothing                                        nil
//	anything else                                  the value itself
//
// storedTag is msgpack's "never used" byte, so no record the FSM encodes
// starts with it and the prefix costs nothing in practice.
const (
	storedTag     = 0xc1
	storedEscaped = 0x00
	storedTask    = 0x01
)

// taskFieldNames are Task's fields in the order appendTask writes them
// (by name, as the reflection codec does).
var taskFieldNames = [taskFields]string{"ArtifactID", "Attempt", "CreatedAt", "FencingToken", "ID",
	"LeaseUntil", "Owner", "Payload", "Priority", "Queue", "Result", "Seq", "Status", "Tenant",
	"UpdatedAt", "Version"}

var (
	// taskNameHeads[i] is field i's name as msgpack writes it.
	taskNameHeads [taskFields][]byte
	// taskRecordHead opens a task record: map16 of taskFields entries.
	taskRecordHead = []byte{0xde, 0, taskFields}
	// taskNamesLen is what a task record holds besides its values.
	taskNamesLen = len(taskRecordHead)
)

func init() {
	for i, name := range taskFieldNames {
		taskNameHeads[i] = mpStr(nil, name)
		taskNamesLen += len(taskNameHeads[i])
	}
}

// scalarLen is the length of the msgpack nil, bool, integer, str or bin at
// the start of b, header included; -1 for anything else or a short b.
func scalarLen(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	var n int
	switch c := b[0]; {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		n = 1
	case c&0xe0 == 0xa0:
		n = 1 + int(c&0x1f)
	case c == 0xcc, c == 0xd0:
		n = 2
	case c == 0xcd, c == 0xd1:
		n = 3
	case c == 0xce, c == 0xd2:
		n = 5
	case c == 0xcf, c == 0xd3:
		n = 9
	case c == 0xd9, c == 0xc4:
		if len(b) < 2 {
			return -1
		}
		n = 2 + int(b[1])
	case c == 0xda, c == 0xc5:
		if len(b) < 3 {
			return -1
		}
		n = 3 + int(binary.BigEndian.Uint16(b[1:]))
	case c == 0xdb, c == 0xc6:
		if len(b) < 5 {
			return -1
		}
		n = 5 + int(binary.BigEndian.Uint32(b[1:]))
	default:
		return -1
	}
	if n > len(b) {
		return -1
	}
	return n
}

// storedEmpty is the stored form of an empty value that is not nil.
var storedEmpty = []byte{storedTag, storedEscaped}

// packVal returns the stored form of v: v itself unless it is a task
// record, starts with storedTag or is empty but not nil. v is not
// modified.
func packVal(v []byte) []byte {
	n, task := storedLen(v)
	switch {
	case !task && n == len(v):
		return v // nil, or kept as given
	case len(v) == 0:
		return storedEmpty
	}
	return appendStored(make([]byte, 0, n), v, task)
}

// storedLen is the length of v's stored form; task reports that v is a
// task record.
func storedLen(v []byte) (n int, task bool) {
	switch {
	case v == nil:
		return 0, false
	case len(v) == 0:
		return len(storedEmpty), false
	case v[0] == storedTag:
		return 2 + len(v), false
	case isTaskRecord(v):
		return 2 + len(v) - taskNamesLen, true
	}
	return len(v), false
}

// appendStored appends v's stored form to b; task is storedLen's.
func appendStored(b, v []byte, task bool) []byte {
	switch {
	case v == nil:
		return b
	case len(v) == 0:
		return append(b, storedEmpty...)
	case task:
		b = append(b, storedTag, storedTask)
		rest := v[len(taskRecordHead):]
		for _, h := range taskNameHeads {
			rest = rest[len(h):]
			n := scalarLen(rest)
			b = append(b, rest[:n]...)
			rest = rest[n:]
		}
		return b
	case v[0] == storedTag:
		return append(append(b, storedTag, storedEscaped), v...)
	}
	return append(b, v...)
}

// isTaskRecord reports whether v is exactly the 16 fields appendTask
// writes, in its order, each a scalar.
func isTaskRecord(v []byte) bool {
	if !bytes.HasPrefix(v, taskRecordHead) {
		return false
	}
	rest := v[len(taskRecordHead):]
	for _, h := range taskNameHeads {
		if !bytes.HasPrefix(rest, h) {
			return false
		}
		n := scalarLen(rest[len(h):])
		if n < 0 {
			return false
		}
		rest = rest[len(h)+n:]
	}
	return len(rest) == 0
}

// unpackVal returns the value whose stored form is s (s itself, or a new
// slice for a task record).
func unpackVal(s []byte) []byte {
	if len(s) < 2 || s[0] != storedTag {
		return s
	}
	if s[1] == storedTask {
		return appendUnpacked(make([]byte, 0, len(s)-2+taskNamesLen), s)
	}
	return s[2:]
}

// appendUnpacked appends the value whose stored form is s to b.
func appendUnpacked(b, s []byte) []byte {
	if len(s) < 2 || s[0] != storedTag {
		return append(b, s...)
	}
	if s[1] != storedTask {
		return append(b, s[2:]...)
	}
	b = append(b, taskRecordHead...)
	rest := s[2:]
	for _, h := range taskNameHeads {
		n := scalarLen(rest) // packTask checked every value
		b = append(append(b, h...), rest[:n]...)
		rest = rest[n:]
	}
	return b
}

// getStored returns the stored form of the value at key.
func (s *Store) getStored(key string) ([]byte, bool) {
	if isHashed(key) {
		return s.hashed.get(key)
	}
	it, ok := s.tree.Get(searchItem(key))
	return it.stored(), ok
}

// decodeStoredTask decodes a task record from its stored form s into t,
// reading exactly what decodeTask reads from the record; false (t
// untouched) when s is not a stored task record or decodeTask would
// refuse the record.
func decodeStoredTask(s []byte, t *Task) bool {
	if len(s) < 2 || s[0] != storedTag || s[1] != storedTask {
		return false
	}
	r := &mpReader{b: s[2:]}
	var x Task
	for _, name := range taskFieldNames {
		r.taskField(name, &x)
	}
	if r.end() != nil {
		return false
	}
	*t = x
	return true
}
