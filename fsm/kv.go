package fsm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// KV command kinds.
const (
	KindKVPut    Kind = "kv.put"
	KindKVDelete Kind = "kv.delete"
	// KindKVPurge deletes entries whose TTL ran out by the command's time.
	// The leader proposes it; no replica's clock decides expiry.
	KindKVPurge Kind = "kv.purge"
)

// KVEntry is an entry of the knowledge store. Version is the log position
// of the write that produced it (index<<16 | sequence): it grows on every
// write of the key and never repeats, even after a delete and re-create.
type KVEntry struct {
	Tenant    string
	Namespace string
	Key       string
	Value     []byte // JSON
	Version   uint64
	UpdatedAt int64
	ExpiresAt int64 // 0: never
}

type kvJSON struct {
	Namespace string          `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Version   uint64          `json:"version"`
	UpdatedAt string          `json:"updated_at"`
	ExpiresAt *string         `json:"expires_at"`
}

// MarshalJSON renders the KV entry of docs/api.md.
func (e *KVEntry) MarshalJSON() ([]byte, error) {
	w := kvJSON{Namespace: e.Namespace, Key: e.Key, Value: jsonOrNull(e.Value), Version: e.Version,
		UpdatedAt: FormatMillis(e.UpdatedAt)}
	if e.ExpiresAt != 0 {
		s := FormatMillis(e.ExpiresAt)
		w.ExpiresAt = &s
	}
	return mustJSON(&w), nil
}

// Live reports whether the entry has not expired at now.
func (e *KVEntry) Live(now int64) bool { return e.ExpiresAt == 0 || e.ExpiresAt > now }

// KVPutArgs writes an entry.
type KVPutArgs struct {
	Namespace, Key string
	Value          []byte
	ExpectVersion  *uint64 // 0: must not exist
	TTLMs          int64
	Fence          *Fence
}

// KVDeleteArgs deletes an entry.
type KVDeleteArgs struct {
	Namespace, Key string
	ExpectVersion  *uint64
	Fence          *Fence
}

// KVPurgeArgs bounds one purge.
type KVPurgeArgs struct{ Max int }

// t/<tenant>/kv/<namespace>/<key>          entry
// kvx/<expiry 16 hex>/<tenant>/<ns>/<key>  expiry index
func kvKey(tenant, ns, key string) string { return "t/" + tenant + "/kv/" + ns + "/" + key }
func kvPrefix(tenant, ns string) string   { return "t/" + tenant + "/kv/" + ns + "/" }
func kvExpiryKey(exp int64, tenant, ns, key string) string {
	return "kvx/" + hex16(exp) + "/" + tenant + "/" + ns + "/" + key
}

const kvExpiryPrefix = "kvx/"

func getKV(st *Store, tenant, ns, key string) (*KVEntry, bool) {
	raw, ok := st.Get(kvKey(tenant, ns, key))
	if !ok {
		return nil, false
	}
	var e KVEntry
	if decode(raw, &e) != nil {
		return nil, false
	}
	return &e, true
}

// liveKV returns the entry unless it is absent or expired at now.
func liveKV(st *Store, tenant, ns, key string, now int64) *KVEntry {
	if e, ok := getKV(st, tenant, ns, key); ok && e.Live(now) {
		return e
	}
	return nil
}

func checkKVVersion(cur *KVEntry, expect *uint64) *Result {
	if expect == nil {
		return nil
	}
	var have uint64
	if cur != nil {
		have = cur.Version
	}
	if have != *expect {
		return fail(CodeVersionMismatch, fmt.Sprintf("entry is at version %d, not %d", have, *expect),
			map[string]any{"current_version": have})
	}
	return nil
}

func (f *FSM) removeKV(e *KVEntry) {
	f.st.Delete(kvKey(e.Tenant, e.Namespace, e.Key))
	if e.ExpiresAt != 0 {
		f.st.Delete(kvExpiryKey(e.ExpiresAt, e.Tenant, e.Namespace, e.Key))
	}
}

func applyKVPut(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a KVPutArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	cur := liveKV(f.st, c.Tenant, a.Namespace, a.Key, ctx.now)
	if r := checkKVVersion(cur, a.ExpectVersion); r != nil {
		return r
	}
	if old, ok := getKV(f.st, c.Tenant, a.Namespace, a.Key); ok {
		f.removeKV(old)
	}
	e := &KVEntry{Tenant: c.Tenant, Namespace: a.Namespace, Key: a.Key, Value: a.Value,
		Version: ctx.nextSeq(), UpdatedAt: ctx.now}
	if a.TTLMs > 0 {
		e.ExpiresAt = ctx.now + a.TTLMs
		f.st.Put(kvExpiryKey(e.ExpiresAt, c.Tenant, a.Namespace, a.Key), nil)
	}
	f.st.Put(kvKey(c.Tenant, a.Namespace, a.Key), encode(e))
	f.emit(c.Tenant, ResourceKV, a.Namespace+"/"+a.Key, a.Namespace+"/"+a.Key, EventPut, e)
	return okValue(OutcomeOK, e)
}

func applyKVDelete(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a KVDeleteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	cur := liveKV(f.st, c.Tenant, a.Namespace, a.Key, ctx.now)
	if cur == nil {
		return fail(CodeNotFound, fmt.Sprintf("no entry %s/%s", a.Namespace, a.Key), nil)
	}
	if r := checkKVVersion(cur, a.ExpectVersion); r != nil {
		return r
	}
	f.removeKV(cur)
	f.emit(c.Tenant, ResourceKV, a.Namespace+"/"+a.Key, a.Namespace+"/"+a.Key, EventDelete, nil)
	return okValue(OutcomeNoContent, nil)
}

func applyKVPurge(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a KVPurgeArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	var expired []*KVEntry
	f.st.Scan(kvExpiryPrefix, "", func(k string, _ []byte) bool {
		if len(expired) >= a.Max || k[len(kvExpiryPrefix):len(kvExpiryPrefix)+16] > hex16(ctx.now) {
			return false
		}
		parts := strings.SplitN(k[len(kvExpiryPrefix)+17:], "/", 3)
		if len(parts) == 3 {
			if e, ok := getKV(f.st, parts[0], parts[1], parts[2]); ok {
				expired = append(expired, e)
			}
		}
		return true
	})
	for _, e := range expired {
		f.removeKV(e)
		f.emit(e.Tenant, ResourceKV, e.Namespace+"/"+e.Key, e.Namespace+"/"+e.Key, EventDelete, nil)
	}
	return okValue(OutcomeOK, map[string]int{"purged": len(expired)})
}

// GetKV returns a live entry at now (the reader's time; reads are not Apply).
func (f *FSM) GetKV(tenant, ns, key string, now int64) (*KVEntry, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e := liveKV(f.st, tenant, ns, key, now)
	return e, f.applied, e != nil
}

// ListKV lists live entries of a namespace whose key has the prefix, in key
// order, after the key after, at most limit. next is the key to continue
// after when more may follow. A page examines at most MaxListWalk entries
// (artifactlife.go), live and visible or not: one that stops there has
// next, the last key examined, even when it is empty.
func (f *FSM) ListKV(tenant, ns, prefix, after string, limit int, now int64, visible func(*KVEntry) bool) (out []*KVEntry, next string, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	base := kvPrefix(tenant, ns)
	from := ""
	if after != "" {
		from = base + after + "\x00"
	}
	out = []*KVEntry{}
	walked, last := 0, ""
	f.st.Scan(base+prefix, from, func(k string, v []byte) bool {
		if walked == MaxListWalk {
			next = last
			return false
		}
		walked++
		var e KVEntry
		if decode(v, &e) != nil || !e.Live(now) || (visible != nil && !visible(&e)) {
			last = k[len(base):]
			return true
		}
		if len(out) == limit {
			next = out[len(out)-1].Key // as before: not a key the caller may not read
			return false
		}
		out = append(out, &e)
		last = e.Key
		return true
	})
	return out, next, f.applied
}

// NextKVExpiry is the earliest TTL expiry in the store, 0 if none.
func (f *FSM) NextKVExpiry() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var next int64
	f.st.Scan(kvExpiryPrefix, "", func(k string, _ []byte) bool {
		_, _ = fmt.Sscanf(k[len(kvExpiryPrefix):len(kvExpiryPrefix)+16], "%x", &next)
		return false
	})
	return next
}

func (a *KVPutArgs) jsonFields() [][]byte { return [][]byte{a.Value} }
