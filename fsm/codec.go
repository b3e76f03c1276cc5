package fsm

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// EntryVersion is the first byte of every log entry Baton writes. A replica
// refuses entries of a version it does not know instead of guessing.
// Version 1 commands have no session fields; an entry with a command in a
// client session is EntryVersion2, written only then, so that a cluster
// whose clients use no sessions writes the same entries as before them.
// An entry with a command that uses the task lifecycle (a task.fail or
// task.retry, or lifecycle fields in a task create or update, also inside
// a transaction: see lifecycle.go) is EntryVersion3, written only then;
// its commands have all of version 2's fields. A member that predates
// lifecycles refuses it rather than apply it without the fields it does
// not know. EntryVersion4 is the same for what came after the lifecycle,
// EntryVersion5 for what came after version 4, and EntryVersion6 for what
// came after version 5 (commandSpec.Since and entryVersioner say which kinds
// and fields).
//
// An entry's version is the latest its commands need (EncodeEntry): a
// cluster that uses none of the newer kinds or fields writes the entries
// an older member reads, so members can be upgraded one at a time.
const (
	EntryVersion  byte = 1
	EntryVersion2 byte = 2
	EntryVersion3 byte = 3
	EntryVersion4 byte = 4
	EntryVersion5 byte = 5
	EntryVersion6 byte = 6
	// EntryVersionLatest is the newest version this build reads and writes.
	EntryVersionLatest = EntryVersion6
)

// MaxCommandsPerEntry bounds how many commands group commit packs into one
// log entry, and so the positions used in fencing tokens.
const MaxCommandsPerEntry = 256

var mh = &codec.MsgpackHandle{}

func init() {
	mh.Canonical = true // sorted map keys: identical bytes on every replica
	mh.WriteExt = true  // str and bin kept apart
	mh.RawToString = false
}

// ErrBadEntry is returned for a log entry that cannot be decoded.
var ErrBadEntry = errors.New("fsm: malformed log entry")

// Encoders and decoders are pooled: making one per record was 17% of all
// decoding time in a CPU profile of the leader under fenced updates.
type pooledEncoder struct {
	buf []byte
	enc *codec.Encoder
}

var (
	encoders = sync.Pool{New: func() any {
		pe := &pooledEncoder{}
		pe.enc = codec.NewEncoderBytes(&pe.buf, mh)
		return pe
	}}
	decoders = sync.Pool{New: func() any { return codec.NewDecoderBytes(nil, mh) }}
)

func encode(v any) []byte {
	// The records every replica handles for every command have writers of
	// their own (fsm/mpcodec.go); anything else goes through reflection.
	switch x := v.(type) {
	case *idemRecord:
		r := &x.Result
		return appendIdemRecord(make([]byte, 0, 96+len(x.FP)+len(r.Code)+len(r.Details)+len(r.Message)+len(r.Value)), x)
	case *Task:
		if x.Life != nil || x.ClaimedFrom != "" || x.CancelRequested || x.Deps != nil || x.Waitpoint != "" || x.ConcurrencyKey != "" {
			break // rare enough for reflection (appendTask writes the 16 fields of records without them)
		}
		return appendTask(make([]byte, 0, 208+len(x.ArtifactID)+len(x.ID)+len(x.Owner)+len(x.Queue)+
			len(x.Status)+len(x.Tenant)+len(x.Payload)+len(x.Result)), x)
	case *TaskUpdateArgs:
		if x.entryV3() || x.Unstarted {
			break // the lifecycle fields, Unstarted: reflection
		}
		return appendTaskUpdateArgs(make([]byte, 0, 128+len(x.ID)+len(x.Payload)+len(x.Result)), x)
	case *QueueClaimArgs:
		if x.Max != 0 {
			break // a batch claim (claimbatch.go): reflection
		}
		return appendQueueClaimArgs(make([]byte, 0, 96+len(x.Queue)+len(x.Owner)+16*len(x.Statuses)), x)
	case *sessionRecord:
		return appendSessionRecord(make([]byte, 0, 80), x)
	}
	pe := encoders.Get().(*pooledEncoder)
	pe.buf = pe.buf[:0]
	pe.enc.ResetBytes(&pe.buf)
	if err := pe.enc.Encode(v); err != nil {
		panic(fmt.Sprintf("fsm: encode %T: %v", v, err)) // only our own types reach here
	}
	// The encoder's buffer is reused; stored records keep only their own
	// bytes (a heap profile at 100,000 tasks once showed 125 of 204 MB live
	// in oversized encoder buffers).
	out := append(make([]byte, 0, len(pe.buf)), pe.buf...)
	if cap(pe.buf) <= 64<<10 { // do not keep a huge buffer alive
		encoders.Put(pe)
	}
	return out
}

func decode(b []byte, v any) error {
	// Hand-written readers first; what they do not expect falls through to
	// the reflection codec.
	var done bool
	switch x := v.(type) {
	case *idemRecord:
		done = readFast(b, x, decodeIdemRecord)
	case *Task:
		done = readFast(b, x, decodeTask)
	case *TaskUpdateArgs:
		done = readFast(b, x, decodeTaskUpdateArgs)
	case *QueueClaimArgs:
		done = readFast(b, x, decodeQueueClaimArgs)
	case *sessionRecord:
		done = readFast(b, x, decodeSessionRecord)
	}
	if done {
		return nil
	}
	// go-msgpack's ResetBytes ignores nil: a pooled decoder given nothing
	// would go on from its previous input ("EOF") and a new one would
	// fail with another message, and an error message is part of an
	// answer every replica stores (FuzzDecodeEntry found two replicas
	// answering one bad entry differently). Empty input fails here, the
	// same way everywhere.
	if len(b) == 0 {
		return io.EOF
	}
	d := decoders.Get().(*codec.Decoder)
	d.ResetBytes(b)
	err := d.Decode(v)
	d.ResetBytes(noBytes) // keep no reference to b
	if err == nil {       // a decoder that failed is not reused
		decoders.Put(d)
	}
	return err
}

var noBytes = []byte{}

// readFast decodes b into *dst with read, leaving *dst untouched unless
// read accepts all of b.
func readFast[T any](b []byte, dst *T, read func([]byte, *T) error) bool {
	var fast T
	if read(b, &fast) != nil {
		return false
	}
	*dst = fast
	return true
}

// EncodeEntry packs commands into one log entry: a version byte followed by
// the msgpack array of commands.
func EncodeEntry(cmds []*Command) []byte {
	size := 1 + 3
	for _, c := range cmds {
		if c != nil {
			size += c.Size()
		}
	}
	v := EntryVersion
	for _, c := range cmds {
		if c == nil {
			continue
		}
		if c.inSession() {
			v = max(v, EntryVersion2)
		}
		v = max(v, c.needs())
	}
	return appendCommands(append(make([]byte, 0, size), v), cmds, v >= EntryVersion2)
}

// needs is the first entry version that may hold c: its kind's, or its
// args' fields' (Command.ver), whichever is later.
func (c *Command) needs() byte { return max(c.ver, kindSince[c.Kind]) }

// inSession reports whether any session field is set.
func (c *Command) inSession() bool { return c.Session != 0 || c.Seq != 0 || c.Ack != 0 }

// DecodeEntry is the inverse of EncodeEntry.
func DecodeEntry(b []byte) ([]*Command, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrBadEntry)
	}
	if b[0] < EntryVersion || b[0] > EntryVersionLatest {
		return nil, fmt.Errorf("%w: unknown version %d", ErrBadEntry, b[0])
	}
	cmds, err := decodeCommands(b[1:], MaxCommandsPerEntry)
	if err != nil {
		cmds = nil
		if err := decode(b[1:], &cmds); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadEntry, err)
		}
	}
	if len(cmds) == 0 || len(cmds) > MaxCommandsPerEntry {
		return nil, fmt.Errorf("%w: %d commands", ErrBadEntry, len(cmds))
	}
	for i, c := range cmds {
		if c == nil {
			return nil, fmt.Errorf("%w: command %d is nil", ErrBadEntry, i)
		}
		if b[0] == EntryVersion && c.inSession() {
			return nil, fmt.Errorf("%w: command %d has session fields in a version %d entry", ErrBadEntry, i, b[0])
		}
		if b[0] < kindSince[c.Kind] {
			return nil, fmt.Errorf("%w: command %d is a %s in a version %d entry", ErrBadEntry, i, c.Kind, b[0])
		}
		c.ver = b[0]
	}
	return cmds, nil
}

// EncodeArgs encodes a command's (or transaction op's) argument struct.
func EncodeArgs(v any) []byte { return encode(v) }
