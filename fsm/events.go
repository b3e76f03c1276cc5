package fsm

import (
	"encoding/json"
	"slices"
	"sort"
	"sync"
)

// Event is one change of a watched object, produced by Apply identically on
// every replica. Events are outputs, not state: they are not in snapshots.
type Event struct {
	Index uint64 `json:"index"`
	// Pos is the event's position among the events of its log index; Last
	// marks the last one, so a resume point is (Index, Pos).
	Pos      int    `json:"-"`
	Last     bool   `json:"-"`
	Resource string `json:"resource"`
	Key      string `json:"key"`
	Type     string `json:"type"` // put or delete
	// Value is the object after a put, encoded when first asked for: most
	// events are never watched, and every replica keeps them.
	Value  *Payload `json:"value,omitempty"`
	Tenant string   `json:"-"`
	// Name is what grants are matched against (a task's queue, a KV entry's
	// namespace/key, a checkpoint's thread, an op id).
	Name string `json:"-"`
}

// Event types.
const (
	EventPut    = "put"
	EventDelete = "delete"
)

// Payload is an event's object, JSON-encoded once, on first use. The
// object is never changed after Apply emits it.
type Payload struct {
	once sync.Once
	obj  any
	raw  json.RawMessage
}

// MarshalJSON encodes the object once and reuses the bytes.
func (p *Payload) MarshalJSON() ([]byte, error) {
	p.once.Do(func() { p.raw = mustJSON(p.obj) })
	return p.raw, nil
}

// emit records an event of the command being applied; rolled back with it.
func (f *FSM) emit(tenant, resource, key, name, typ string, value any) {
	ev := Event{Tenant: tenant, Resource: resource, Key: key, Name: name, Type: typ}
	if value != nil {
		ev.Value = &Payload{obj: value}
	}
	f.pending = append(f.pending, ev)
}

// History keeps the most recent events in memory for watchers, bounded by
// an estimate of the bytes they hold (eventBytes): once the total passes
// the limit, the oldest are evicted down to three quarters of it, so the
// copy happens once per quarter of the budget, not on every append. Whole
// log indexes are evicted together; Floor is the newest index whose events
// are gone (or that the history started after), so a watcher resuming at
// or after Floor misses nothing, and one before it must re-read the state.
// The newest index's events always stay, whatever their size.
type History struct {
	mu     sync.RWMutex
	limit  int64   // bytes
	bytes  int64   // estimate of what events holds
	events []Event // oldest first
	floor  uint64
}

func newHistory(limit int64) *History {
	if limit <= 0 {
		limit = DefaultWatchHistoryBytes
	}
	return &History{limit: limit}
}

// DefaultWatchHistoryBytes is how many bytes of events a node keeps for
// watchers by default (--watch-history-bytes).
const DefaultWatchHistoryBytes int64 = 32 << 20

// eventOverhead is what an Event costs besides its strings and value: the
// struct in the history's array (about 120 bytes) and its Payload.
const eventOverhead = 160

// eventBytes estimates the memory an event holds: its strings, and its
// value twice (the object, and its JSON once a watcher asked for it).
func eventBytes(e *Event) int64 {
	n := eventOverhead + len(e.Key) + len(e.Name) + len(e.Tenant)
	if e.Value != nil {
		n += 2 * valueBytes(e.Value.obj)
	}
	return int64(n)
}

// valueBytes estimates the encoded size of an event's object: the sum of
// its variable-length fields plus an allowance for the rest.
func valueBytes(v any) int {
	n, _ := valueBytesOf(v)
	return n
}

// valueBytesOf is valueBytes, and whether v's type is one it measures: a
// type it does not gets a flat guess, which a large value would defeat.
func valueBytesOf(v any) (int, bool) {
	const fixed = 128
	switch x := v.(type) {
	case *Task:
		return fixed + len(x.Tenant) + len(x.ID) + len(x.Queue) + len(x.Status) + len(x.Owner) +
			len(x.ArtifactID) + len(x.Payload) + len(x.Result), true
	case *KVEntry:
		return fixed + len(x.Tenant) + len(x.Namespace) + len(x.Key) + len(x.Value), true
	case CheckpointView:
		n := fixed
		if x.Checkpoint != nil {
			cp := x.Checkpoint
			n += len(cp.Tenant) + len(cp.Thread) + len(cp.ID) + len(cp.ParentID) + len(cp.Data) + len(cp.Metadata) +
				len(cp.NS) + len(cp.RunID)
			for _, c := range cp.Chunks {
				n += 96 + len(c.Digest)
			}
			for _, b := range cp.BlobRefs {
				n += 64 + len(b.Channel) + len(b.Version)
			}
		}
		return n, true
	case taskWritesView:
		n := fixed + len(x.TaskID)
		for _, w := range x.Writes {
			n += 32 + len(w.TaskPath) + len(w.Channel) + len(w.Value) + 2*len(w.Bytes) // base64 in JSON
		}
		return n, true
	case *Op:
		return fixed + len(x.Tenant) + len(x.ID) + len(x.Kind) + len(x.ParamsDigest) + len(x.TaskID) +
			len(x.State) + len(x.Result), true
	case *Ref:
		return fixed + len(x.Ref) + len(x.ArtifactID) + len(x.Name), true
	case *Waitpoint:
		return fixed + len(x.Tenant) + len(x.ID) + len(x.State) + len(x.Payload) + len(x.TaskID), true
	case *Manifest:
		n := fixed + len(x.ArtifactID) + len(x.Name) + len(x.Digest) + len(x.MediaType) + len(x.Metadata) +
			len(x.TaskID) + len(x.CreatedBy) + len(x.CreatedAt)
		for _, s := range x.Sources {
			n += len(s) + 8
		}
		for _, c := range x.Chunks {
			n += 96 + len(c.Digest)
		}
		return n, true
	}
	return 1024, false // a type not listed above: TestValueBytesCoversEveryEvent refuses one
}

func (h *History) append(evs []Event) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, evs...)
	for i := range evs {
		h.bytes += eventBytes(&evs[i])
	}
	if h.bytes <= h.limit {
		return
	}
	// Evict the oldest down to three quarters of the limit, never the
	// newest index, never splitting an index.
	target := h.limit - h.limit/4
	newest := h.events[len(h.events)-1].Index
	cut, freed := 0, int64(0)
	for cut < len(h.events) && h.bytes-freed > target && h.events[cut].Index != newest {
		freed += eventBytes(&h.events[cut])
		cut++
	}
	for cut < len(h.events) && cut > 0 && h.events[cut].Index == h.events[cut-1].Index {
		freed += eventBytes(&h.events[cut])
		cut++
	}
	if cut == 0 {
		return
	}
	h.floor = h.events[cut-1].Index
	h.bytes -= freed
	// In place: a fresh slice each time made every trim allocate a slice
	// of the whole history. Since copies events out under the lock, so no
	// reader holds on to the array being shifted. An array much larger
	// than what is left is given back.
	n := copy(h.events, h.events[cut:])
	clear(h.events[n:])
	h.events = h.events[:n]
	if cap(h.events) > 4*n+1024 {
		h.events = slices.Clip(slices.Clone(h.events))
	}
}

// Bytes is the estimated memory the history holds, and its limit.
func (h *History) Bytes() (used, limit int64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.bytes, h.limit
}

// reset empties the history; nothing at or before index can be resumed.
func (h *History) reset(index uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events, h.floor, h.bytes = nil, index, 0
}

// Floor is the newest index a watcher may resume from without 410.
func (h *History) Floor() uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.floor
}

// Since returns up to max events after the resume point (index, pos); pos
// -1 means after every event of index. compacted reports that events after
// that point were already evicted.
func (h *History) Since(index uint64, pos int, max int) (evs []Event, compacted bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if index < h.floor {
		return nil, true
	}
	i := sort.Search(len(h.events), func(i int) bool {
		e := h.events[i]
		return e.Index > index || (e.Index == index && pos >= 0 && e.Pos > pos)
	})
	end := min(len(h.events), i+max)
	return append([]Event(nil), h.events[i:end]...), false
}
