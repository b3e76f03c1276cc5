package fsm

import (
	"encoding/binary"
	"errors"
	"math"
)

// A hand-written msgpack codec for Task, the record every task command
// reads and writes on every replica. It writes exactly the bytes the
// reflection codec (mh) writes for a *Task, so records, snapshots and the
// state digest are the same whichever codec made them (TestTaskCodec and
// FuzzTaskCodec compare the two); reading falls back to the reflection
// codec for anything it does not expect. BenchmarkCodecs measures both.

// taskFields is the number of Task's fields; the reflection codec writes a
// struct as a map of its fields sorted by name.
const taskFields = 16

func appendTask(b []byte, t *Task) []byte {
	b = append(b, 0xde, 0, taskFields) // map16
	b = mpStr(mpStr(b, "ArtifactID"), t.ArtifactID)
	b = mpUint(mpStr(b, "Attempt"), t.Attempt)
	b = mpInt(mpStr(b, "CreatedAt"), t.CreatedAt)
	b = mpUint(mpStr(b, "FencingToken"), t.FencingToken)
	b = mpStr(mpStr(b, "ID"), t.ID)
	b = mpInt(mpStr(b, "LeaseUntil"), t.LeaseUntil)
	b = mpStr(mpStr(b, "Owner"), t.Owner)
	b = mpBin(mpStr(b, "Payload"), t.Payload)
	b = mpInt(mpStr(b, "Priority"), t.Priority)
	b = mpStr(mpStr(b, "Queue"), t.Queue)
	b = mpBin(mpStr(b, "Result"), t.Result)
	b = mpUint(mpStr(b, "Seq"), t.Seq)
	b = mpStr(mpStr(b, "Status"), t.Status)
	b = mpStr(mpStr(b, "Tenant"), t.Tenant)
	b = mpInt(mpStr(b, "UpdatedAt"), t.UpdatedAt)
	return mpUint(mpStr(b, "Version"), t.Version)
}

func mpStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n < 256:
		b = append(b, 0xd9, byte(n))
	case n < 65536:
		b = append(b, 0xda, byte(n>>8), byte(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func mpBin(b []byte, p []byte) []byte {
	switch n := len(p); {
	case p == nil:
		return append(b, 0xc0)
	case n < 256:
		b = append(b, 0xc4, byte(n))
	case n < 65536:
		b = append(b, 0xc5, byte(n>>8), byte(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, p...)
}

func mpUint(b []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

func mpInt(b []byte, v int64) []byte {
	switch {
	case v > math.MaxInt8:
		switch {
		case v <= math.MaxInt16:
			return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
		case v <= math.MaxInt32:
			return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

// errMP is returned by the reader for anything outside what appendTask
// writes; the caller then decodes with the reflection codec.
var errMP = errors.New("fsm: unexpected msgpack")

// mpReader reads the msgpack that appendTask writes.
type mpReader struct {
	b   []byte
	err error
}

func (r *mpReader) byte1() byte {
	if r.err != nil || len(r.b) < 1 {
		r.err = errMP
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *mpReader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = errMP
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *mpReader) be(n int) uint64 {
	p := r.take(n)
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v
}

// raw reads a str or bin header and returns its bytes; nil is (nil, true).
func (r *mpReader) raw() (p []byte, isNil bool) {
	c := r.byte1()
	switch {
	case c == 0xc0:
		return nil, true
	case c&0xe0 == 0xa0:
		return r.take(int(c & 0x1f)), false
	case c == 0xd9 || c == 0xc4:
		return r.take(int(r.be(1))), false
	case c == 0xda || c == 0xc5:
		return r.take(int(r.be(2))), false
	case c == 0xdb || c == 0xc6:
		return r.take(int(r.be(4))), false
	}
	r.err = errMP
	return nil, false
}

func (r *mpReader) str() string {
	p, _ := r.raw()
	return string(p)
}

// bin returns a copy (the reflection codec does not alias its input
// either): nil for nil, an empty slice for an empty str or bin.
func (r *mpReader) bin() []byte {
	p, isNil := r.raw()
	if isNil || r.err != nil {
		return nil
	}
	return append([]byte{}, p...)
}

// int reads any msgpack integer; ok is false for a value out of range.
func (r *mpReader) int() (v int64, u uint64, neg bool) {
	c := r.byte1()
	switch {
	case c <= 0x7f:
		return int64(c), uint64(c), false
	case c >= 0xe0:
		return int64(int8(c)), 0, true
	case c == 0xcc, c == 0xcd, c == 0xce, c == 0xcf:
		u = r.be(1 << (c - 0xcc))
		return int64(u), u, false
	case c == 0xd0:
		v = int64(int8(r.be(1)))
	case c == 0xd1:
		v = int64(int16(r.be(2)))
	case c == 0xd2:
		v = int64(int32(r.be(4)))
	case c == 0xd3:
		v = int64(r.be(8))
	case c == 0xc0:
		return 0, 0, false
	default:
		r.err = errMP
		return 0, 0, false
	}
	return v, uint64(v), v < 0
}

func (r *mpReader) i64() int64 {
	c := byte(0)
	if len(r.b) > 0 {
		c = r.b[0]
	}
	v, u, _ := r.int()
	if c == 0xcf && u > math.MaxInt64 {
		r.err = errMP
	}
	return v
}

func (r *mpReader) u64() uint64 {
	_, u, neg := r.int()
	if neg {
		r.err = errMP
	}
	return u
}

// decodeTask decodes what appendTask writes into t, fields in any order.
func decodeTask(b []byte, t *Task) error {
	r := &mpReader{b: b}
	r.fields(func(k []byte) bool { return r.taskField(string(k), t) })
	return r.end()
}

// taskField reads the value of t's field k; false for a key that is not
// one of Task's fields.
func (r *mpReader) taskField(k string, t *Task) bool {
	switch k {
	case "ArtifactID":
		t.ArtifactID = r.str()
	case "Attempt":
		t.Attempt = r.u64()
	case "CreatedAt":
		t.CreatedAt = r.i64()
	case "FencingToken":
		t.FencingToken = r.u64()
	case "ID":
		t.ID = r.str()
	case "LeaseUntil":
		t.LeaseUntil = r.i64()
	case "Owner":
		t.Owner = r.str()
	case "Payload":
		t.Payload = r.bin()
	case "Priority":
		t.Priority = r.i64()
	case "Queue":
		t.Queue = r.str()
	case "Result":
		t.Result = r.bin()
	case "Seq":
		t.Seq = r.u64()
	case "Status":
		t.Status = r.str()
	case "Tenant":
		t.Tenant = r.str()
	case "UpdatedAt":
		t.UpdatedAt = r.i64()
	case "Version":
		t.Version = r.u64()
	default:
		return false
	}
	return true
}

// fields reads a map and has field read the value of each key; field
// reports false for a key it does not know.
func (r *mpReader) fields(field func(k []byte) bool) {
	n := r.mapLen()
	for i := 0; i < n && r.err == nil; i++ {
		k, _ := r.raw()
		if r.err == nil && !field(k) {
			r.err = errMP
		}
	}
}

// end reports an error met while reading, or bytes left over.
func (r *mpReader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errMP
	}
	return r.err
}

// Commands, the other record every replica decodes for every command,
// written and read the same way (fields sorted by name). A log entry is
// its version byte then the msgpack array of its commands: EntryVersion
// entries hold Command's 8 fields from before client sessions,
// EntryVersion2 entries all 11 (see EncodeEntry).

func appendCommand(b []byte, c *Command, v2 bool) []byte {
	if v2 {
		b = append(b, 0x8b) // fixmap, 11 fields
		b = mpUint(mpStr(b, "Ack"), c.Ack)
	} else {
		b = append(b, 0x88) // fixmap, 8 fields
	}
	b = mpBin(mpStr(b, "Args"), c.Args)
	b = mpBin(mpStr(b, "IdemFP"), c.IdemFP)
	b = mpStr(mpStr(b, "IdemKey"), c.IdemKey)
	b = mpInt(mpStr(b, "IdemTTL"), c.IdemTTL)
	b = mpStr(mpStr(b, "Kind"), string(c.Kind))
	b = mpInt(mpStr(b, "Now"), c.Now)
	b = mpStr(mpStr(b, "Principal"), c.Principal)
	if v2 {
		b = mpUint(mpStr(b, "Seq"), c.Seq)
		b = mpUint(mpStr(b, "Session"), c.Session)
	}
	return mpStr(mpStr(b, "Tenant"), c.Tenant)
}

func mpArrayHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n < 65536:
		return append(b, 0xdc, byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

// appendCommands writes what the reflection codec writes for cmds (for
// v1, for the 8-field Command of that version).
func appendCommands(b []byte, cmds []*Command, v2 bool) []byte {
	if cmds == nil {
		return append(b, 0xc0)
	}
	b = mpArrayHeader(b, len(cmds))
	for _, c := range cmds {
		if c == nil {
			b = append(b, 0xc0)
			continue
		}
		b = appendCommand(b, c, v2)
	}
	return b
}

func (r *mpReader) mapLen() int {
	switch c := r.byte1(); {
	case c&0xf0 == 0x80:
		return int(c & 0x0f)
	case c == 0xde:
		return int(r.be(2))
	case c == 0xdf:
		return int(r.be(4))
	}
	r.err = errMP
	return 0
}

func (r *mpReader) command(c *Command) {
	r.fields(func(k []byte) bool {
		switch string(k) {
		case "Ack":
			c.Ack = r.u64()
		case "Seq":
			c.Seq = r.u64()
		case "Session":
			c.Session = r.u64()
		case "Args":
			c.Args = r.bin()
		case "IdemFP":
			c.IdemFP = r.bin()
		case "IdemKey":
			c.IdemKey = r.str()
		case "IdemTTL":
			c.IdemTTL = r.i64()
		case "Kind":
			c.Kind = Kind(r.str())
		case "Now":
			c.Now = r.i64()
		case "Principal":
			c.Principal = r.str()
		case "Tenant":
			c.Tenant = r.str()
		default:
			return false
		}
		return true
	})
}

// decodeCommands reads what appendCommands writes when it holds between 1
// and max commands, none nil; anything else is left to the reflection
// codec (and DecodeEntry's checks).
func decodeCommands(b []byte, max int) ([]*Command, error) {
	r := &mpReader{b: b}
	n := 0
	switch c := r.byte1(); {
	case c&0xf0 == 0x90:
		n = int(c & 0x0f)
	case c == 0xdc:
		n = int(r.be(2))
	case c == 0xdd:
		n = int(r.be(4))
	default:
		return nil, errMP
	}
	if r.err != nil || n < 1 || n > max {
		return nil, errMP
	}
	cmds := make([]*Command, n)
	store := make([]Command, n)
	for i := range cmds {
		if len(r.b) > 0 && r.b[0] == 0xc0 {
			return nil, errMP
		}
		cmds[i] = &store[i]
		r.command(cmds[i])
	}
	if r.end() != nil {
		return nil, errMP
	}
	return cmds, nil
}

// Idempotency records, written for every command with an Idempotency-Key
// (the Go client sends one with every write) on every replica.

func appendIdemRecord(b []byte, rec *idemRecord) []byte {
	b = append(b, 0x83) // fixmap: Expires, FP, Result
	b = mpInt(mpStr(b, "Expires"), rec.Expires)
	b = mpBin(mpStr(b, "FP"), rec.FP)
	r := &rec.Result
	b = append(mpStr(b, "Result"), 0x87) // its 7 encoded fields (Obj is not)
	b = mpStr(mpStr(b, "Code"), r.Code)
	b = mpBin(mpStr(b, "Details"), r.Details)
	b = mpUint(mpStr(b, "Index"), r.Index)
	b = mpStr(mpStr(b, "Message"), r.Message)
	b = mpUint(mpStr(b, "Outcome"), uint64(r.Outcome))
	b = mpStr(b, "Replay")
	if r.Replay {
		b = append(b, 0xc3)
	} else {
		b = append(b, 0xc2)
	}
	return mpBin(mpStr(b, "Value"), r.Value)
}

func (r *mpReader) bool() bool {
	switch r.byte1() {
	case 0xc3:
		return true
	case 0xc2, 0xc0:
		return false
	}
	r.err = errMP
	return false
}

// decodeIdemRecord reads what appendIdemRecord writes into rec.
func decodeIdemRecord(b []byte, rec *idemRecord) error {
	r := &mpReader{b: b}
	res := &rec.Result
	result := func(k []byte) bool {
		switch string(k) {
		case "Code":
			res.Code = r.str()
		case "Details":
			res.Details = r.bin()
		case "Index":
			res.Index = r.u64()
		case "Message":
			res.Message = r.str()
		case "Outcome":
			u := r.u64()
			if u > math.MaxUint8 {
				r.err = errMP
			}
			res.Outcome = Outcome(u)
		case "Replay":
			res.Replay = r.bool()
		case "Value":
			res.Value = r.bin()
		default:
			return false
		}
		return true
	}
	r.fields(func(k []byte) bool {
		switch string(k) {
		case "Expires":
			rec.Expires = r.i64()
		case "FP":
			rec.FP = r.bin()
		case "Result":
			r.fields(result)
		default:
			return false
		}
		return true
	})
	return r.end()
}

// Session records (sessions.go), read and written for every write in a
// client session on every replica: through reflection, their six
// integers cost a replica more than the task record they answer for.

func appendSessionRecord(b []byte, s *sessionRecord) []byte {
	b = append(b, 0x86) // fixmap: its 6 fields, by name
	b = mpInt(mpStr(b, "Answers"), s.Answers)
	b = mpInt(mpStr(b, "Bytes"), s.Bytes)
	b = mpInt(mpStr(b, "Expires"), s.Expires)
	b = mpUint(mpStr(b, "Floor"), s.Floor)
	b = mpUint(mpStr(b, "ID"), s.ID)
	return mpInt(mpStr(b, "TTL"), s.TTL)
}

// decodeSessionRecord reads what appendSessionRecord writes into s.
func decodeSessionRecord(b []byte, s *sessionRecord) error {
	r := &mpReader{b: b}
	r.fields(func(k []byte) bool {
		switch string(k) {
		case "Answers":
			s.Answers = r.i64()
		case "Bytes":
			s.Bytes = r.i64()
		case "Expires":
			s.Expires = r.i64()
		case "Floor":
			s.Floor = r.u64()
		case "ID":
			s.ID = r.u64()
		case "TTL":
			s.TTL = r.i64()
		default:
			return false
		}
		return true
	})
	return r.end()
}

// Arguments of the two commands every queue worker sends (a queue claim,
// then a fenced update), read without the reflection codec: go-msgpack's
// reflection was 11% of a replica's time applying a fenced update. The
// server encodes them with the reflection codec (encode), which writes
// each struct as a map of its fields by name; anything else falls back.

func (r *mpReader) optU64() *uint64 {
	if len(r.b) > 0 && r.b[0] == 0xc0 {
		r.b = r.b[1:]
		return nil
	}
	v := r.u64()
	return &v
}

func (r *mpReader) optStr() *string {
	if len(r.b) > 0 && r.b[0] == 0xc0 {
		r.b = r.b[1:]
		return nil
	}
	p, _ := r.raw()
	s := string(p)
	return &s
}

// strs reads an array of strings (nil for nil).
func (r *mpReader) strs() []string {
	n := 0
	switch c := r.byte1(); {
	case c == 0xc0:
		return nil
	case c&0xf0 == 0x90:
		n = int(c & 0x0f)
	case c == 0xdc:
		n = int(r.be(2))
	case c == 0xdd:
		n = int(r.be(4))
	default:
		r.err = errMP
		return nil
	}
	if r.err != nil || n > len(r.b) { // each element takes a byte at least
		r.err = errMP
		return nil
	}
	out := make([]string, n)
	for i := range out {
		if len(r.b) > 0 && r.b[0] == 0xc0 { // a nil element: the reflection codec's call
			r.err = errMP
			return nil
		}
		out[i] = r.str()
	}
	return out
}

func decodeTaskUpdateArgs(b []byte, a *TaskUpdateArgs) error {
	r := &mpReader{b: b}
	r.fields(func(k []byte) bool {
		switch string(k) {
		case "ArtifactID":
			a.ArtifactID = r.optStr()
		case "ExpectStatus":
			a.ExpectStatus = r.optStr()
		case "ExpectVersion":
			a.ExpectVersion = r.optU64()
		case "FencingToken":
			a.FencingToken = r.optU64()
		case "ID":
			a.ID = r.str()
		case "Payload":
			a.Payload = r.bin()
		case "Release":
			a.Release = r.bool()
		case "Result":
			a.Result = r.bin()
		case "Status":
			a.Status = r.optStr()
		case "Unstarted":
			a.Unstarted = r.bool()
		default:
			return false
		}
		return true
	})
	return r.end()
}

func decodeQueueClaimArgs(b []byte, a *QueueClaimArgs) error {
	r := &mpReader{b: b}
	r.fields(func(k []byte) bool {
		switch string(k) {
		case "Final":
			a.Final = r.bool()
		case "LeaseMs":
			a.LeaseMs = r.i64()
		case "Max":
			a.Max = r.i64()
		case "Owner":
			a.Owner = r.str()
		case "Queue":
			a.Queue = r.str()
		case "SetStatus":
			a.SetStatus = r.optStr()
		case "Statuses":
			a.Statuses = r.strs()
		default:
			return false
		}
		return true
	})
	return r.end()
}

// The leader encodes the same two argument records for every claim and
// update it proposes; these write the reflection codec's bytes for them
// (fields sorted by name; nil pointers and slices as nil).

func mpOptStr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, 0xc0)
	}
	return mpStr(b, *s)
}

func mpOptUint(b []byte, v *uint64) []byte {
	if v == nil {
		return append(b, 0xc0)
	}
	return mpUint(b, *v)
}

func mpBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

func appendTaskUpdateArgs(b []byte, a *TaskUpdateArgs) []byte {
	b = append(b, 0x89) // fixmap, 9 fields
	b = mpOptStr(mpStr(b, "ArtifactID"), a.ArtifactID)
	b = mpOptStr(mpStr(b, "ExpectStatus"), a.ExpectStatus)
	b = mpOptUint(mpStr(b, "ExpectVersion"), a.ExpectVersion)
	b = mpOptUint(mpStr(b, "FencingToken"), a.FencingToken)
	b = mpStr(mpStr(b, "ID"), a.ID)
	b = mpBin(mpStr(b, "Payload"), a.Payload)
	b = mpBool(mpStr(b, "Release"), a.Release)
	b = mpBin(mpStr(b, "Result"), a.Result)
	return mpOptStr(mpStr(b, "Status"), a.Status)
}

func appendQueueClaimArgs(b []byte, a *QueueClaimArgs) []byte {
	b = append(b, 0x86) // fixmap, 6 fields
	b = mpBool(mpStr(b, "Final"), a.Final)
	b = mpInt(mpStr(b, "LeaseMs"), a.LeaseMs)
	b = mpStr(mpStr(b, "Owner"), a.Owner)
	b = mpStr(mpStr(b, "Queue"), a.Queue)
	b = mpOptStr(mpStr(b, "SetStatus"), a.SetStatus)
	b = mpStr(b, "Statuses")
	switch n := len(a.Statuses); {
	case a.Statuses == nil:
		b = append(b, 0xc0)
	case n < 16:
		b = append(b, 0x90|byte(n))
	case n < 65536:
		b = append(b, 0xdc, byte(n>>8), byte(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
	}
	for _, s := range a.Statuses {
		b = mpStr(b, s)
	}
	return b
}
