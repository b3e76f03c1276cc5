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

// History keeps at least the most recent limit events (at most twice as
// many) in memory for watchers. Whole log
// indexes are evicted together; Floor is the newest index whose events are
// gone (or that the history started after), so a watcher resuming at or
// after Floor misses nothing, and one before it must re-read the state.
type History struct {
	mu     sync.RWMutex
	limit  int
	events []Event // oldest first
	floor  uint64
}

func newHistory(limit int) *History {
	if limit <= 0 {
		limit = DefaultWatchHistory
	}
	return &History{limit: limit}
}

// DefaultWatchHistory is how many events a node keeps for watchers.
const DefaultWatchHistory = 100_000

func (h *History) append(evs []Event) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if need := len(h.events) + len(evs); need > cap(h.events) {
		// Doubling up to the most the history holds before a trim: append's
		// own growth (1.25x for large slices) copied the events about four
		// times over, and left as many arrays to the GC, on the way to
		// that size (2% of a follower's time in a CPU profile under queue
		// load). Not allocated at once: every FSM has a history, and
		// tests and fuzzing make many.
		room := min(max(len(h.events), 1024), 2*h.limit-len(h.events))
		h.events = slices.Grow(h.events, max(room, len(evs)))
	}
	h.events = append(h.events, evs...)
	// Trim only when twice the limit is reached, down to the limit: the
	// copy then happens once per limit events, not on every append (which
	// made each Apply copy the whole history once it was full).
	if len(h.events) <= 2*h.limit {
		return
	}
	cut := len(h.events) - h.limit
	for cut < len(h.events) && h.events[cut].Index == h.events[cut-1].Index {
		cut++ // never split one index's events
	}
	h.floor = h.events[cut-1].Index
	// In place: a fresh slice each time made every trim allocate (and the
	// appends after it grow again) a slice of the whole history, 11 MB at
	// the default limit. Since copies events out under the lock, so no
	// reader holds on to the array being shifted.
	n := copy(h.events, h.events[cut:])
	clear(h.events[n:])
	h.events = h.events[:n]
}

// reset empties the history; nothing at or before index can be resumed.
func (h *History) reset(index uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events, h.floor = nil, index
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
