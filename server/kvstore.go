package server

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
	"github.com/baton-dev/baton/server/core/replica"
)

// The knowledge store behind LangGraph's BaseStore (docs/api.md "Knowledge
// store (LangGraph)"). Its own resource rather than more KV routes: items
// live under tuple namespaces whose labels may hold any character but
// ".", and search, filters, k-nearest scoring and namespace listing run
// on the server. Reads are POSTs because their arguments are JSON.
func (s *Server) storeRoutes(add addRoute) {
	add("POST", "/v1/tenants/{tenant}/store/write", routeWrite, s.handleStoreWrite, cmd(wire.StoreWrite{}, fsm.KindStoreWrite))
	add("POST", "/v1/tenants/{tenant}/store/get", routeRead, s.handleStoreGet, cmd(wire.StoreGet{}, fsm.KindStoreTouch))
	add("POST", "/v1/tenants/{tenant}/store/search", routeRead, s.handleStoreSearch, cmd(wire.StoreSearch{}, fsm.KindStoreTouch))
	add("POST", "/v1/tenants/{tenant}/store/namespaces", routeRead, s.handleStoreNamespaces)
}

// Bounds of one store request (docs/operations.md).
const (
	maxStoreLimit  = 1000
	maxStoreOffset = 100_000
	// maxStoreFilterTerms bounds a search filter's fields and operators,
	// nested ones counted: each is evaluated for every item the search
	// examines (up to --store-scan-max) under the state's read lock.
	maxStoreFilterTerms = 64
	// maxStoreFilterBytes bounds the filter's values, in bytes of JSON:
	// an equality compares the encoded value with each item's.
	maxStoreFilterBytes = 16 << 10
	// defaultStoreScanMax is how many items (or namespaces) one search or
	// listing examines at most (batond --store-scan-max).
	defaultStoreScanMax = 10_000
)

// storeGrantRoot is the start of every store item's name in grants of
// the kv resource: "@store/" then each label path-escaped and followed by
// "/". "@" starts no KV name, so a KV grant on a namespace never reaches
// the store and the reverse.
const storeGrantRoot = "@store/"

func storeGrantName(ns []string) string {
	var b strings.Builder
	b.WriteString(storeGrantRoot)
	for _, l := range ns {
		b.WriteString(url.PathEscape(l))
		b.WriteByte('/')
	}
	return b.String()
}

func (s *Server) storeScanMax() int {
	if s.cfg.StoreScanMax > 0 {
		return s.cfg.StoreScanMax
	}
	return defaultStoreScanMax
}

func validStoreNS(what string, ns []string, prefix bool) error {
	if err := fsm.ValidStoreNS(ns, prefix); err != nil {
		return badRequest("%s: %v", what, err)
	}
	for _, l := range ns {
		if !utf8.ValidString(l) {
			return badRequest("%s: label %q is not valid UTF-8", what, l)
		}
	}
	return nil
}

func validStoreKey(key string) error {
	if key == "" || len(key) > fsm.MaxStoreKeyBytes || !utf8.ValidString(key) {
		return badRequest("key must be 1 to %d bytes of UTF-8", fsm.MaxStoreKeyBytes)
	}
	return nil
}

// storeAdmit refuses a caller outside the tenant, or with no grant of
// action anywhere in the store, before its body is read.
func (s *Server) storeAdmit(id *identity, tenant, action string) error {
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if !id.admin && !grantsReach(id.grants, resKV, storeGrantRoot, action) {
		return errorf(fsm.CodeForbidden, "principal %q has no %s grant on the store (kv %q)", id.principal, action, storeGrantRoot)
	}
	return nil
}

func (s *Server) handleStoreWrite(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	if !id.admin && !grantsReach(id.grants, resKV, storeGrantRoot, actWrite) && !grantsReach(id.grants, resKV, storeGrantRoot, actDelete) {
		return errorf(fsm.CodeForbidden, "principal %q has no write or delete grant on the store", id.principal)
	}
	var req wire.StoreWrite
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	if len(req.Ops) == 0 || len(req.Ops) > fsm.MaxStoreOps {
		return badRequest("ops must hold 1 to %d puts or deletes, not %d", fsm.MaxStoreOps, len(req.Ops))
	}
	args := &fsm.StoreWriteArgs{Ops: make([]fsm.StoreWriteOp, len(req.Ops))}
	for i := range req.Ops {
		op, err := storeWriteOp(&req.Ops[i])
		if err != nil {
			return err
		}
		action := actWrite
		if op.Value == nil {
			action = actDelete
		}
		if err := id.allow(tenant, resKV, storeGrantName(op.NS), action); err != nil {
			return err
		}
		args.Ops[i] = *op
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindStoreWrite, args, body)
}

func storeWriteOp(o *wire.StoreWriteOp) (*fsm.StoreWriteOp, error) {
	if err := validStoreNS("namespace", o.Namespace, false); err != nil {
		return nil, err
	}
	if err := validStoreKey(o.Key); err != nil {
		return nil, err
	}
	op := &fsm.StoreWriteOp{NS: o.Namespace, Key: o.Key}
	if v := strings.TrimSpace(string(o.Value)); v == "" || v == "null" {
		if o.Vectors != nil || o.TTLMinutes != nil {
			return nil, badRequest("a delete (no value) has no vectors or ttl_minutes")
		}
		return op, nil
	}
	value, err := compactJSON("value", o.Value)
	if err != nil {
		return nil, err
	}
	if value[0] != '{' {
		return nil, badRequest("value must be a JSON object")
	}
	op.Value = value
	if len(o.Vectors) > fsm.MaxStoreVectors {
		return nil, badRequest("an item has at most %d vectors, not %d", fsm.MaxStoreVectors, len(o.Vectors))
	}
	for _, v := range o.Vectors {
		if err := validVector(v); err != nil {
			return nil, err
		}
		if len(v) != len(o.Vectors[0]) {
			return nil, badRequest("an item's vectors have one dimension, not %d and %d", len(o.Vectors[0]), len(v))
		}
	}
	op.Vectors = o.Vectors
	if o.TTLMinutes != nil {
		m := *o.TTLMinutes
		if !(m > 0) || m*60_000 > maxTTLMs {
			return nil, badRequest("ttl_minutes must be above 0 and at most %d, not %v", int64(maxTTLMs/60_000), m)
		}
		op.TTLMs = max(1, int64(math.Round(m*60_000)))
	}
	return op, nil
}

func validVector(v []float32) error {
	if len(v) == 0 || len(v) > fsm.MaxStoreDims {
		return badRequest("a vector has 1 to %d dimensions, not %d", fsm.MaxStoreDims, len(v))
	}
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return badRequest("a vector holds a NaN or an infinity")
		}
	}
	return nil
}

func storeRefs(in []wire.StoreRef) ([]fsm.StoreRef, error) {
	out := make([]fsm.StoreRef, len(in))
	for i, ref := range in {
		if err := validStoreNS("namespace", ref.Namespace, false); err != nil {
			return nil, err
		}
		if err := validStoreKey(ref.Key); err != nil {
			return nil, err
		}
		out[i] = fsm.StoreRef{NS: ref.Namespace, Key: ref.Key}
	}
	return out, nil
}

// refresh moves the expiry of the items read (refresh on read): a
// replicated write of their expiry only, one command for the whole
// answer. A stale read (on a follower) refreshes nothing.
func (s *Server) refresh(r *http.Request, id *identity, tenant string, refs []fsm.StoreRef) error {
	if len(refs) == 0 || !s.cluster.IsLeader() {
		return nil
	}
	for len(refs) > 0 {
		n := min(len(refs), fsm.MaxStoreOps)
		cmd := s.replica.Command(replica.Caller{Tenant: tenant, Principal: id.principalName()}, fsm.KindStoreTouch, &fsm.StoreTouchArgs{Items: refs[:n]})
		res, err := s.apply(r, cmd)
		if err != nil {
			return err
		}
		if !res.OK() {
			return resultError(res)
		}
		refs = refs[n:]
	}
	return nil
}

func (s *Server) handleStoreGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.storeAdmit(id, tenant, actRead); err != nil {
		return err
	}
	var req wire.StoreGet
	if _, err := s.readJSON(w, r, &req); err != nil {
		return err
	}
	if len(req.Items) == 0 || len(req.Items) > fsm.MaxStoreOps {
		return badRequest("items must name 1 to %d items, not %d", fsm.MaxStoreOps, len(req.Items))
	}
	refs, err := storeRefs(req.Items)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		if err := id.allow(tenant, resKV, storeGrantName(ref.NS), actRead); err != nil {
			return err
		}
	}
	items, ttl, index := s.fsm.GetStoreItems(tenant, refs, s.now())
	if req.RefreshTTL {
		if err := s.refresh(r, id, tenant, ttl); err != nil {
			return err
		}
	}
	return s.readReply(w, index, map[string]any{"items": items})
}

func storePage(limit, offset int) (int, int, error) {
	if limit == 0 {
		limit = 10
	}
	if limit < 1 || limit > maxStoreLimit {
		return 0, 0, badRequest("limit must be 1 to %d, not %d", maxStoreLimit, limit)
	}
	if offset < 0 || offset > maxStoreOffset {
		return 0, 0, badRequest("offset must be 0 to %d, not %d", maxStoreOffset, offset)
	}
	return limit, offset, nil
}

func (s *Server) handleStoreSearch(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.storeAdmit(id, tenant, actRead); err != nil {
		return err
	}
	var req wire.StoreSearch
	if _, err := s.readJSON(w, r, &req); err != nil {
		return err
	}
	if err := validStoreNS("namespace_prefix", req.NamespacePrefix, true); err != nil {
		return err
	}
	q := &fsm.StoreQuery{Prefix: req.NamespacePrefix, MaxScan: s.storeScanMax()}
	var err error
	if q.Limit, q.Offset, err = storePage(req.Limit, req.Offset); err != nil {
		return err
	}
	if req.Vector != nil {
		if err := validVector(req.Vector); err != nil {
			return err
		}
		q.Vector = req.Vector
	}
	if q.Filter, err = storeFilter(req.Filter); err != nil {
		return err
	}
	if !id.admin {
		if !grantsReach(id.grants, resKV, storeGrantName(req.NamespacePrefix), actRead) {
			return errorf(fsm.CodeForbidden, "principal %q has no read grant under %q", id.principal, storeGrantName(req.NamespacePrefix))
		}
		q.Visible = func(ns []string) bool { return grantsAllow(id.grants, resKV, storeGrantName(ns), actRead) }
	}
	items, ttl, truncated, index := s.fsm.SearchStore(tenant, q, s.now())
	if req.RefreshTTL {
		if err := s.refresh(r, id, tenant, ttl); err != nil {
			return err
		}
	}
	return s.readReply(w, index, map[string]any{"items": items, "truncated": truncated})
}

// storeFilter decodes a search filter: field -> value (equality) or an
// object of operators ($eq $ne $gt $gte $lt $lte) or of nested fields.
func storeFilter(in map[string]json.RawMessage) (map[string]any, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > maxStoreFilterTerms {
		return nil, badRequest("filter has %d fields, over %d", len(in), maxStoreFilterTerms)
	}
	out := make(map[string]any, len(in))
	terms, size := 0, 0
	for k, raw := range in {
		if size += len(k) + len(raw); size > maxStoreFilterBytes {
			return nil, badRequest("filter is over %d bytes", maxStoreFilterBytes)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, badRequest("filter %q is not valid JSON", k)
		}
		if m, ok := v.(map[string]any); ok {
			for op := range m {
				if strings.HasPrefix(op, "$") && !fsm.StoreOps[op] {
					return nil, badRequest("filter %q: unknown operator %q (the operators are $eq $ne $gt $gte $lt $lte)", k, op)
				}
			}
		}
		if terms += filterTerms(v); terms > maxStoreFilterTerms {
			return nil, badRequest("filter has over %d fields and operators, nested ones counted", maxStoreFilterTerms)
		}
		out[k] = v
	}
	return out, nil
}

// filterTerms counts one filter member's field and the fields and
// operators of the objects nested in its value.
func filterTerms(v any) int {
	n := 1
	if m, ok := v.(map[string]any); ok {
		for _, e := range m {
			n += filterTerms(e)
		}
	}
	return n
}

func (s *Server) handleStoreNamespaces(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	if err := s.storeAdmit(id, tenant, actRead); err != nil {
		return err
	}
	var req wire.StoreNamespaces
	if _, err := s.readJSON(w, r, &req); err != nil {
		return err
	}
	limit, offset, err := storePage(req.Limit, req.Offset)
	if err != nil {
		return err
	}
	if req.Limit == 0 {
		limit = 100
	}
	if req.MaxDepth < 0 || req.MaxDepth > fsm.MaxStoreLabels {
		return badRequest("max_depth must be 0 (whole namespaces) to %d, not %d", fsm.MaxStoreLabels, req.MaxDepth)
	}
	if len(req.MatchConditions) > 8 {
		return badRequest("at most 8 match_conditions, not %d", len(req.MatchConditions))
	}
	conds := make([]fsm.NSMatch, len(req.MatchConditions))
	for i, c := range req.MatchConditions {
		if c.MatchType != "prefix" && c.MatchType != "suffix" {
			return badRequest("match_conditions[%d].match_type must be prefix or suffix, not %q", i, c.MatchType)
		}
		if err := validStoreNS("match_conditions path", c.Path, true); err != nil {
			return err
		}
		conds[i] = fsm.NSMatch{Suffix: c.MatchType == "suffix", Path: c.Path}
	}
	var visible func([]string) bool
	if !id.admin {
		visible = func(ns []string) bool { return grantsAllow(id.grants, resKV, storeGrantName(ns), actRead) }
	}
	list, truncated, index := s.fsm.ListStoreNamespaces(tenant, conds, req.MaxDepth, limit, offset, s.storeScanMax(), visible)
	return s.readReply(w, index, map[string]any{"namespaces": list, "truncated": truncated})
}

// storePurgeBatch bounds the items one store.purge deletes.
const storePurgeBatch = 256

// purgeStore proposes store.purge, stamped with the leader's time, when
// the earliest item expiry has passed by that time.
func (s *Server) purgeStore() {
	if next := s.fsm.NextStoreExpiry(); next == 0 || next > s.now() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.replica.ProposeOwn(ctx, fsm.KindStorePurge, "", &fsm.StorePurgeArgs{Max: storePurgeBatch}); err != nil {
		s.log.Debug("store purge", "err", err)
	}
}
