package fsm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// The knowledge store behind LangGraph's BaseStore (docs/api.md "Knowledge
// store (LangGraph)"): items under tuple namespaces, each a JSON object
// with created_at, updated_at, an optional TTL refreshed on read, and
// optional vectors the caller computed. Writes are replicated commands;
// search, k-nearest scoring and namespace listing are reads under the
// state's read lock, each bounded by the items it examines. Only in
// EntryVersion6 entries.
const (
	// KindStoreWrite puts and deletes items, all or nothing.
	KindStoreWrite Kind = "store.write"
	// KindStoreTouch moves the expiry of items with a TTL to the command's
	// time plus their TTL (refresh on read); nothing else changes.
	KindStoreTouch Kind = "store.touch"
	// KindStorePurge deletes items whose TTL ran out by the command's time.
	// The leader proposes it.
	KindStorePurge Kind = "store.purge"
)

// Bounds of the knowledge store, checked by the server before proposing
// and again in Apply.
const (
	MaxStoreLabels     = 32   // labels in a namespace
	MaxStoreLabelBytes = 256  // bytes in a label
	MaxStoreKeyBytes   = 1024 // bytes in an item key
	MaxStoreDims       = 4096 // dimensions of a vector
	MaxStoreVectors    = 16   // vectors (indexed fields) of one item
	MaxStoreOps        = 256  // puts and deletes in one store.write, items in one store.touch
)

// StoreItem is one item of the knowledge store. Version is the log
// position of the write that last changed its value (one per store.write,
// shared by its items); a touch changes only ExpiresAt.
type StoreItem struct {
	Tenant string
	NS     []string
	Key    string
	Value  []byte // a JSON object
	// Vecs are the item's vectors, each Dims float32 in little-endian
	// order, one after another: bytes decode in one copy, where a list of
	// float32 took 70% of a search's time in decoding.
	Vecs      []byte
	Dims      int
	CreatedAt int64
	UpdatedAt int64
	Version   uint64
	TTLMs     int64 // 0: never expires
	ExpiresAt int64 // 0: never
}

// Live reports whether the item has not expired at now.
func (it *StoreItem) Live(now int64) bool { return it.ExpiresAt == 0 || it.ExpiresAt > now }

// StoreRef names an item.
type StoreRef struct {
	NS  []string
	Key string
}

// StoreWriteOp puts an item (Value set) or deletes it (Value nil).
type StoreWriteOp struct {
	NS      []string
	Key     string
	Value   []byte
	Vectors [][]float32
	TTLMs   int64
}

// StoreWriteArgs are the ops of one store.write, applied in order.
type StoreWriteArgs struct{ Ops []StoreWriteOp }

// StoreTouchArgs refreshes the expiry of live items that have a TTL.
type StoreTouchArgs struct{ Items []StoreRef }

// StorePurgeArgs bounds one purge.
type StorePurgeArgs struct{ Max int }

func (a *StoreWriteArgs) jsonFields() [][]byte {
	out := make([][]byte, 0, len(a.Ops))
	for i := range a.Ops {
		out = append(out, a.Ops[i].Value)
	}
	return out
}

// Keys:
//
//	t/<tenant>/ks/<ns>\x00<key>            item
//	t/<tenant>/ksn/<ns>                    namespace: its item count
//	ksx/<expiry 16 hex>/<tenant>\x00<ns>\x00<key>  expiry index
//	cfg/store6                             marker: the store was used
//
// <ns> is each label escaped (StoreLabelEscape) and followed by ".": a
// label has no "." (LangGraph forbids it), so a prefix of labels is a
// prefix of keys that stops at a label's end, and no escaped label holds
// the "\x00" that ends the namespace.
const (
	storeExpiryPrefix = "ksx/"
	storeMarkerKey    = "cfg/store6"
)

// StoreLabelEscape escapes "%", control bytes and "/" of a label as %XX.
func StoreLabelEscape(l string) string {
	var b strings.Builder
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c == '%' || c < 0x20 || c == 0x7f || c == '/' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// storeNS encodes a namespace (or a prefix of one).
func storeNS(ns []string) string {
	var b strings.Builder
	for _, l := range ns {
		b.WriteString(StoreLabelEscape(l))
		b.WriteByte('.')
	}
	return b.String()
}

func storeItemsBase(tenant string) string { return "t/" + tenant + "/ks/" }
func storeNSBase(tenant string) string    { return "t/" + tenant + "/ksn/" }
func storeItemKey(tenant, nsEnc, key string) string {
	return storeItemsBase(tenant) + nsEnc + "\x00" + key
}
func storeExpiryKey(exp int64, tenant, nsEnc, key string) string {
	return storeExpiryPrefix + hex16(exp) + "/" + tenant + "\x00" + nsEnc + "\x00" + key
}

func getStoreItem(st *Store, k string) (*StoreItem, bool) {
	raw, ok := st.Get(k)
	if !ok {
		return nil, false
	}
	var it StoreItem
	if decode(raw, &it) != nil {
		return nil, false
	}
	return &it, true
}

// validStoreNS checks a namespace of an item (non-empty labels, no ".").
func validStoreNS(ns []string, prefix bool) error {
	if (!prefix && len(ns) == 0) || len(ns) > MaxStoreLabels {
		return fmt.Errorf("a namespace has 1 to %d labels, not %d", MaxStoreLabels, len(ns))
	}
	for _, l := range ns {
		if l == "" || len(l) > MaxStoreLabelBytes || strings.Contains(l, ".") {
			return fmt.Errorf("namespace label %q must be 1 to %d bytes without \".\"", l, MaxStoreLabelBytes)
		}
	}
	return nil
}

// ValidStoreNS is validStoreNS for the server: prefix allows no labels.
func ValidStoreNS(ns []string, prefix bool) error { return validStoreNS(ns, prefix) }

func (f *FSM) markStore() {
	if !f.st.Has(storeMarkerKey) {
		f.st.Put(storeMarkerKey, []byte{1})
	}
}

// storeNSAdd adds d to a namespace's item count, deleting it at zero.
func (f *FSM) storeNSAdd(tenant, nsEnc string, d int64) {
	k := storeNSBase(tenant) + nsEnc
	var n int64
	if raw, ok := f.st.Get(k); ok {
		_ = decode(raw, &n)
	}
	if n += d; n <= 0 {
		f.st.Delete(k)
		return
	}
	f.st.Put(k, encode(n))
}

func (f *FSM) removeStoreItem(it *StoreItem) {
	nsEnc := storeNS(it.NS)
	f.st.Delete(storeItemKey(it.Tenant, nsEnc, it.Key))
	if it.ExpiresAt != 0 {
		f.st.Delete(storeExpiryKey(it.ExpiresAt, it.Tenant, nsEnc, it.Key))
	}
	f.storeNSAdd(it.Tenant, nsEnc, -1)
}

func (f *FSM) insertStoreItem(it *StoreItem) {
	nsEnc := storeNS(it.NS)
	if it.ExpiresAt != 0 {
		f.st.Put(storeExpiryKey(it.ExpiresAt, it.Tenant, nsEnc, it.Key), nil)
	}
	f.st.Put(storeItemKey(it.Tenant, nsEnc, it.Key), encode(it))
	f.storeNSAdd(it.Tenant, nsEnc, 1)
}

func applyStoreWrite(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a StoreWriteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if len(a.Ops) == 0 || len(a.Ops) > MaxStoreOps {
		return fail(CodeInvalidArgument, fmt.Sprintf("a store write has 1 to %d ops, not %d", MaxStoreOps, len(a.Ops)), nil)
	}
	for i := range a.Ops {
		op := &a.Ops[i]
		if err := validStoreNS(op.NS, false); err != nil {
			return fail(CodeInvalidArgument, err.Error(), nil)
		}
		if op.Key == "" || len(op.Key) > MaxStoreKeyBytes || op.TTLMs < 0 || len(op.Vectors) > MaxStoreVectors {
			return fail(CodeInvalidArgument, fmt.Sprintf("op %d: bad key, ttl or vectors", i), nil)
		}
		for _, v := range op.Vectors {
			if len(v) == 0 || len(v) > MaxStoreDims || len(v) != len(op.Vectors[0]) {
				return fail(CodeInvalidArgument, fmt.Sprintf("op %d: vectors have one dimension of 1 to %d", i, MaxStoreDims), nil)
			}
		}
	}
	f.markStore()
	version := ctx.nextSeq()
	for i := range a.Ops {
		op := &a.Ops[i]
		nsEnc := storeNS(op.NS)
		old, had := getStoreItem(f.st, storeItemKey(c.Tenant, nsEnc, op.Key))
		if had {
			f.removeStoreItem(old)
		}
		if op.Value == nil {
			continue
		}
		it := &StoreItem{Tenant: c.Tenant, NS: op.NS, Key: op.Key, Value: op.Value, Vecs: packVectors(op.Vectors),
			CreatedAt: ctx.now, UpdatedAt: ctx.now, Version: version, TTLMs: op.TTLMs}
		if len(op.Vectors) > 0 {
			it.Dims = len(op.Vectors[0])
		}
		if had && old.Live(ctx.now) {
			// updated_at grows with every update even when the leader's
			// clock does not (two writes in one millisecond, a new leader
			// whose clock is behind).
			it.CreatedAt, it.UpdatedAt = old.CreatedAt, max(ctx.now, old.UpdatedAt+1)
		}
		if op.TTLMs > 0 {
			it.ExpiresAt = ctx.now + op.TTLMs
		}
		f.insertStoreItem(it)
	}
	return okValue(OutcomeOK, map[string]int{"written": len(a.Ops)})
}

func applyStoreTouch(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a StoreTouchArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if len(a.Items) > MaxStoreOps {
		return fail(CodeInvalidArgument, fmt.Sprintf("a store touch has at most %d items", MaxStoreOps), nil)
	}
	n := 0
	for _, ref := range a.Items {
		nsEnc := storeNS(ref.NS)
		it, ok := getStoreItem(f.st, storeItemKey(c.Tenant, nsEnc, ref.Key))
		// An expired item is not revived: it is gone for readers already.
		if !ok || it.TTLMs == 0 || !it.Live(ctx.now) || it.ExpiresAt >= ctx.now+it.TTLMs {
			continue
		}
		f.st.Delete(storeExpiryKey(it.ExpiresAt, it.Tenant, nsEnc, it.Key))
		it.ExpiresAt = ctx.now + it.TTLMs
		f.st.Put(storeExpiryKey(it.ExpiresAt, it.Tenant, nsEnc, it.Key), nil)
		f.st.Put(storeItemKey(it.Tenant, nsEnc, it.Key), encode(it))
		n++
	}
	return okValue(OutcomeOK, map[string]int{"refreshed": n})
}

func applyStorePurge(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a StorePurgeArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	type due struct{ idx, item string }
	var list []due
	f.st.Scan(storeExpiryPrefix, "", func(k string, _ []byte) bool {
		p := len(storeExpiryPrefix)
		if len(list) >= a.Max || len(k) < p+17 || k[p:p+16] > hex16(ctx.now) {
			return false
		}
		rest := k[p+17:]
		if i := strings.IndexByte(rest, 0); i > 0 {
			list = append(list, due{k, storeItemsBase(rest[:i]) + rest[i+1:]})
		} else {
			list = append(list, due{k, ""})
		}
		return true
	})
	n := 0
	for _, d := range list {
		if it, ok := getStoreItem(f.st, d.item); ok && !it.Live(ctx.now) {
			f.removeStoreItem(it)
			n++
		}
		f.st.Delete(d.idx) // an index key whose item is gone (tenant deleted) goes too
	}
	return okValue(OutcomeOK, map[string]int{"purged": n})
}

// NextStoreExpiry is the earliest item expiry in the store, 0 if none.
func (f *FSM) NextStoreExpiry() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var next int64
	f.st.Scan(storeExpiryPrefix, "", func(k string, _ []byte) bool {
		_, _ = fmt.Sscanf(k[len(storeExpiryPrefix):len(storeExpiryPrefix)+16], "%x", &next)
		return false
	})
	return next
}

// StoreItemJSON is an item as docs/api.md renders it.
type StoreItemJSON struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	CreatedAt string          `json:"created_at"`
	UpdatedAt string          `json:"updated_at"`
	ExpiresAt *string         `json:"expires_at,omitempty"`
	Score     *float64        `json:"score,omitempty"`
}

func (it *StoreItem) render(score *float64) *StoreItemJSON {
	j := &StoreItemJSON{Namespace: it.NS, Key: it.Key, Value: jsonOrNull(it.Value),
		CreatedAt: FormatMillis(it.CreatedAt), UpdatedAt: FormatMillis(it.UpdatedAt), Score: score}
	if it.ExpiresAt != 0 {
		s := FormatMillis(it.ExpiresAt)
		j.ExpiresAt = &s
	}
	return j
}

// GetStoreItems returns the live items named by refs at now, nil for one
// absent or expired, in refs' order; visible hides an item from the caller
// (answered as absent).
func (f *FSM) GetStoreItems(tenant string, refs []StoreRef, now int64) ([]*StoreItemJSON, []StoreRef, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*StoreItemJSON, len(refs))
	var ttl []StoreRef
	for i, ref := range refs {
		it, ok := getStoreItem(f.st, storeItemKey(tenant, storeNS(ref.NS), ref.Key))
		if !ok || !it.Live(now) {
			continue
		}
		out[i] = it.render(nil)
		if it.TTLMs > 0 {
			ttl = append(ttl, ref)
		}
	}
	return out, ttl, f.applied
}

// StoreQuery is a search under a namespace prefix.
type StoreQuery struct {
	Prefix []string
	Filter map[string]any // decoded JSON: field -> value or {"$op": value}
	Vector []float32      // nil: no scoring, most recently updated first
	Limit  int
	Offset int
	// MaxScan bounds the items examined (live or not); a search that
	// stops there answers Truncated.
	MaxScan int
	Visible func(ns []string) bool
}

// SearchStore answers q at now: the matching live items, by descending
// score when q.Vector is set (items without vectors after the scored ones),
// else by most recent update; then offset and limit. ttl names the items
// answered that have a TTL (for a refresh).
func (f *FSM) SearchStore(tenant string, q *StoreQuery, now int64) (out []*StoreItemJSON, ttl []StoreRef, truncated bool, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	// A hit keeps the item's key, not the item: a search may match
	// --store-scan-max items, and only a page of them is rendered.
	type hit struct {
		key     string
		version uint64
		score   *float64
	}
	var hits []hit
	scanned := 0
	base := storeItemsBase(tenant)
	f.st.Scan(base+storeNS(q.Prefix), "", func(k string, v []byte) bool {
		if scanned == q.MaxScan {
			truncated = true
			return false
		}
		scanned++
		var it StoreItem
		if decode(v, &it) != nil || !it.Live(now) || (q.Visible != nil && !q.Visible(it.NS)) {
			return true
		}
		if len(q.Filter) > 0 {
			var val map[string]any
			if json.Unmarshal(it.Value, &val) != nil || !storeMatch(val, q.Filter) {
				return true
			}
		}
		h := hit{key: strings.Clone(k), version: it.Version}
		if q.Vector != nil {
			h.score = bestCosine(q.Vector, it.Vecs, it.Dims)
		}
		hits = append(hits, h)
		return true
	})
	sort.SliceStable(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if q.Vector != nil && (a.score == nil) != (b.score == nil) {
			return a.score != nil
		}
		if a.score != nil && b.score != nil && *a.score != *b.score {
			return *a.score > *b.score
		}
		return a.version > b.version
	})
	out = []*StoreItemJSON{}
	for i := q.Offset; i < len(hits) && len(out) < q.Limit; i++ {
		it, ok := getStoreItem(f.st, hits[i].key)
		if !ok {
			continue
		}
		out = append(out, it.render(hits[i].score))
		if it.TTLMs > 0 {
			ttl = append(ttl, StoreRef{NS: it.NS, Key: it.Key})
		}
	}
	return out, ttl, truncated, f.applied
}

// packVectors lays vectors of one dimension out as StoreItem.Vecs.
func packVectors(vs [][]float32) []byte {
	var b []byte
	for _, v := range vs {
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	}
	return b
}

// bestCosine is the highest cosine similarity of q to any of the vectors
// packed in vecs (LangGraph scores an item by its best field), nil when
// there are none or they are of another dimension (another embedding
// model's: not comparable).
func bestCosine(q []float32, vecs []byte, dims int) *float64 {
	if dims != len(q) || dims == 0 {
		return nil
	}
	var nq float64
	for _, x := range q {
		nq += float64(x) * float64(x)
	}
	var best *float64
	for off := 0; off+4*dims <= len(vecs); off += 4 * dims {
		var dot, nv float64
		for i, x := range q {
			y := float64(math.Float32frombits(binary.LittleEndian.Uint32(vecs[off+4*i:])))
			dot += float64(x) * y
			nv += y * y
		}
		s := 0.0
		if nq > 0 && nv > 0 {
			s = dot / (math.Sqrt(nq) * math.Sqrt(nv))
		}
		if best == nil || s > *best {
			best = &s
		}
	}
	return best
}

// storeMatch reports whether an item's value passes a filter: every
// field's condition holds (LangGraph's InMemoryStore semantics).
func storeMatch(val map[string]any, filter map[string]any) bool {
	for k, cond := range filter {
		if !storeCompare(val[k], cond) {
			return false
		}
	}
	return true
}

func storeCompare(v, cond any) bool {
	switch c := cond.(type) {
	case map[string]any:
		ops := false
		for k := range c {
			if strings.HasPrefix(k, "$") {
				ops = true
			}
		}
		if ops {
			for op, arg := range c {
				if !storeOp(v, op, arg) {
					return false
				}
			}
			return true
		}
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		return storeMatch(m, c)
	case []any:
		l, ok := v.([]any)
		if !ok || len(l) != len(c) {
			return false
		}
		for i := range c {
			if !storeCompare(l[i], c[i]) {
				return false
			}
		}
		return true
	}
	return jsonEqual(v, cond)
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// storeOp applies one operator; ordering operators compare numbers with
// numbers and strings with strings, anything else does not match.
func storeOp(v any, op string, arg any) bool {
	switch op {
	case "$eq":
		return jsonEqual(v, arg)
	case "$ne":
		return !jsonEqual(v, arg)
	}
	var c int
	switch x := v.(type) {
	case float64:
		y, ok := arg.(float64)
		if !ok {
			return false
		}
		c = cmpFloat(x, y)
	case string:
		y, ok := arg.(string)
		if !ok {
			return false
		}
		c = strings.Compare(x, y)
	default:
		return false
	}
	switch op {
	case "$gt":
		return c > 0
	case "$gte":
		return c >= 0
	case "$lt":
		return c < 0
	case "$lte":
		return c <= 0
	}
	return false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// StoreOps are the filter operators a search accepts.
var StoreOps = map[string]bool{"$eq": true, "$ne": true, "$gt": true, "$gte": true, "$lt": true, "$lte": true}

// NSMatch is a LangGraph match condition: labels ("*" matches any one)
// that begin (prefix) or end (suffix) a namespace.
type NSMatch struct {
	Suffix bool
	Path   []string
}

func (m *NSMatch) matches(ns []string) bool {
	if len(ns) < len(m.Path) {
		return false
	}
	off := 0
	if m.Suffix {
		off = len(ns) - len(m.Path)
	}
	for i, p := range m.Path {
		if p != "*" && ns[off+i] != p {
			return false
		}
	}
	return true
}

// ListStoreNamespaces lists the namespaces holding items, in key order,
// that pass every condition, each cut to maxDepth labels (0: whole) and
// de-duplicated, then offset and limit. It examines at most maxScan
// namespaces (truncated: it stopped there).
func (f *FSM) ListStoreNamespaces(tenant string, conds []NSMatch, maxDepth, limit, offset, maxScan int, visible func([]string) bool) (out [][]string, truncated bool, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	// A prefix condition without wildcards narrows the scan.
	scanPrefix := ""
	for _, c := range conds {
		if !c.Suffix {
			var lead []string
			for _, p := range c.Path {
				if p == "*" {
					break
				}
				lead = append(lead, p)
			}
			scanPrefix = storeNS(lead)
		}
	}
	base := storeNSBase(tenant)
	out = [][]string{}
	seen, skipped, scanned := "", 0, 0
	f.st.Scan(base+scanPrefix, "", func(k string, _ []byte) bool {
		if scanned == maxScan {
			truncated = true
			return false
		}
		scanned++
		ns := storeNSDecode(k[len(base):])
		for _, c := range conds {
			if !c.matches(ns) {
				return true
			}
		}
		if visible != nil && !visible(ns) {
			return true
		}
		if maxDepth > 0 && len(ns) > maxDepth {
			ns = ns[:maxDepth]
		}
		enc := storeNS(ns)
		if enc == seen { // namespaces cut to one prefix are adjacent in key order
			return true
		}
		seen = enc
		if skipped < offset {
			skipped++
			return true
		}
		out = append(out, ns)
		return len(out) < limit
	})
	return out, truncated, f.applied
}

// storeNSDecode is the inverse of storeNS.
func storeNSDecode(enc string) []string {
	parts := strings.Split(strings.TrimSuffix(enc, "."), ".")
	for i, p := range parts {
		if strings.IndexByte(p, '%') < 0 {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(p); j++ {
			if p[j] == '%' && j+2 < len(p) {
				var c byte
				_, _ = fmt.Sscanf(p[j+1:j+3], "%02X", &c)
				b.WriteByte(c)
				j += 2
			} else {
				b.WriteByte(p[j])
			}
		}
		parts[i] = b.String()
	}
	return parts
}
