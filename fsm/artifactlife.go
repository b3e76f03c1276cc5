package fsm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The end of an artifact's life: deleting versions, by hand or by a
// keep-last-N policy, and listing names. Both kinds came after
// EntryVersion3 (their command table rows say Since: EntryVersion4).
//
//	t/<tenant>/artpol/<prefix>  ArtifactPolicy: keep the newest N versions of names under prefix
//	cfg/artifact-policy         marker: some tenant has a policy (snapshotMarkers)
//
// A deleted version's chunks lose one reference each; a chunk no version
// names any more goes back into the chunk GC index with a fresh grace
// period (unreferenceChunk), and chunk.gc collects it like any unreferenced
// upload: nothing here removes a hold or a body.
const (
	KindArtifactDelete Kind = "artifact.delete"
	KindArtifactPolicy Kind = "artifact.policy"
)

// Bounds of the artifact life commands, fixed so that every replica does
// the same work.
const (
	// MaxArtifactDeleteVersions is the most versions one whole-name delete
	// removes; a name with more is refused (delete versions one by one, or
	// let a policy trim it).
	MaxArtifactDeleteVersions = 1000
	// MaxArtifactDeleteChunkRefs is the most chunk references one
	// whole-name delete releases, every version's chunks counted (a 1 MiB
	// manifest names about 11,000): 1,000 versions alone would let one
	// Apply release 11 million. A name holding more is refused before any
	// version is deleted, with the detail delete_by_version, and the Go
	// SDK's DeleteArtifact then deletes its versions one by one.
	MaxArtifactDeleteChunkRefs = 65_536
	// MaxArtifactPolicies is the most policies a tenant may have.
	MaxArtifactPolicies = 100
	// artifactTrimPerPublish is the most versions one publish trims under
	// a policy; a longer backlog (a policy set on a name that already had
	// many versions) is trimmed over the next publishes.
	artifactTrimPerPublish = 64
	// artifactTrimWalk is the most old versions one publish reads to find
	// those to trim (the others are pinned by refs).
	artifactTrimWalk = 1024
	// maxReferencedRefs is the most ref names a referenced error carries.
	maxReferencedRefs = 100
)

// artifactPolicyMarkerKey is present once any tenant has set an artifact
// policy: a member that predates policies would publish without trimming,
// so a snapshot of such a state is snapshotFormat3, which it refuses.
const artifactPolicyMarkerKey = "cfg/artifact-policy"

// ArtifactDeleteArgs deletes one version of Name (Version > 0) or every
// version (Version 0). ExpectArtifactID (one version) and ExpectVersion
// (every version: the name's newest version) are optional guards.
type ArtifactDeleteArgs struct {
	Name             string
	Version          uint64
	ExpectArtifactID *string
	ExpectVersion    *uint64
}

// ArtifactPolicy keeps the newest KeepLast versions of every name starting
// with Prefix; older ones are deleted when a new version is published,
// except those a ref points at.
type ArtifactPolicy struct {
	Prefix   string `json:"prefix"`
	KeepLast uint64 `json:"keep_last"`
}

// ArtifactPolicyArgs sets a prefix's policy; KeepLast 0 clears it.
type ArtifactPolicyArgs struct {
	Prefix   string
	KeepLast uint64
}

// ArtifactSummary is one name of an artifact listing.
type ArtifactSummary struct {
	Name          string `json:"name"`
	LatestVersion uint64 `json:"latest_version"`
	Versions      int    `json:"versions"`
}

func artifactsRoot(tenant string) string                { return "t/" + tenant + "/art/" }
func artifactPolicyPrefix(tenant string) string         { return "t/" + tenant + "/artpol/" }
func artifactPolicyKey(tenant, prefix string) string    { return artifactPolicyPrefix(tenant) + prefix }
func versionHex(v uint64) string                        { return fmt.Sprintf("%016x", v) }
func artifactVersionsPrefix(tenant, name string) string { return artifactPrefix(tenant, name) + "v/" }

func applyArtifactDelete(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a ArtifactDeleteArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if a.Version != 0 {
		return f.deleteOneVersion(ctx, c.Tenant, &a)
	}
	// The checks read the artifact index and one key: the versions are
	// read and decoded only once the delete is sure to be within bounds.
	n := f.st.arts.versionCount(c.Tenant, a.Name)
	if n == 0 {
		return fail(CodeNotFound, fmt.Sprintf("artifact %q not found", a.Name), nil)
	}
	if latest := newestVersion(f.st, c.Tenant, a.Name); a.ExpectVersion != nil && *a.ExpectVersion != latest {
		return fail(CodeVersionMismatch, fmt.Sprintf("artifact %q is at version %d, not %d", a.Name, latest, *a.ExpectVersion),
			map[string]any{"current_version": latest})
	}
	if n > MaxArtifactDeleteVersions {
		return fail(CodeInvalidArgument, fmt.Sprintf("artifact %q has %d versions, more than the %d one delete removes: delete versions one by one or set a keep-last policy",
			a.Name, n, MaxArtifactDeleteVersions), nil)
	}
	// Each version's id and chunk count come from the front of its
	// manifest: the chunks are decoded only once the delete is sure.
	ids, refs := versionHeads(f.st, c.Tenant, a.Name)
	if r := referencedError(f.st, c.Tenant, a.Name, ids); r != nil {
		return r
	}
	if refs > MaxArtifactDeleteChunkRefs {
		return fail(CodeInvalidArgument, fmt.Sprintf("artifact %q holds %d chunk references over its %d versions, more than the %d one delete releases: delete its versions one by one (the Go SDK's DeleteArtifact and baton artifact rm do)",
			a.Name, refs, n, MaxArtifactDeleteChunkRefs), map[string]any{"delete_by_version": true, "versions": n, "chunk_refs": refs})
	}
	versions := artifactVersionList(f.st, c.Tenant, a.Name)
	for _, m := range versions {
		f.deleteVersion(ctx, c.Tenant, m)
	}
	f.st.Delete(artifactLatestKey(c.Tenant, a.Name))
	return okValue(OutcomeNoContent, nil)
}

// newestVersion is the newest version of name that exists (0: none), read
// from its greatest key.
func newestVersion(st *Store, tenant, name string) uint64 {
	k, ok := st.lastKey(artifactVersionsPrefix(tenant, name))
	if !ok {
		return 0
	}
	v, _ := strconv.ParseUint(k[len(artifactVersionsPrefix(tenant, name)):], 16, 64)
	return v
}

func (f *FSM) deleteOneVersion(ctx *applyCtx, tenant string, a *ArtifactDeleteArgs) *Result {
	m, ok := getRecord[Manifest](f.st, artifactVersionKey(tenant, a.Name, versionHex(a.Version)))
	if !ok {
		return fail(CodeNotFound, fmt.Sprintf("artifact %s version %d not found", a.Name, a.Version), nil)
	}
	if a.ExpectArtifactID != nil && *a.ExpectArtifactID != m.ArtifactID {
		return fail(CodeVersionMismatch, fmt.Sprintf("artifact %s version %d is %s, not %s", a.Name, a.Version, m.ArtifactID, *a.ExpectArtifactID),
			map[string]any{"artifact_id": m.ArtifactID})
	}
	if r := referencedError(f.st, tenant, a.Name, []string{m.ArtifactID}); r != nil {
		return r
	}
	f.deleteVersion(ctx, tenant, m)
	if f.st.arts.versionCount(tenant, a.Name) == 0 {
		// The name is gone: its next publication is version 1 again.
		f.st.Delete(artifactLatestKey(tenant, a.Name))
	}
	return okValue(OutcomeNoContent, nil)
}

// referencedError refuses to delete versions that a ref points at (by
// artifact id: a ref names an id, and deleting a version of that id could
// leave it pointing at nothing). It reads the artifact index, not the refs.
func referencedError(st *Store, tenant, name string, ids []string) *Result {
	seen := map[string]bool{}
	total := 0
	var names []string
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		n, first := st.arts.refsTo(tenant, id, maxReferencedRefs)
		total += n
		names = append(names, first...)
	}
	if total == 0 {
		return nil
	}
	// The first maxReferencedRefs names over all ids are among the first
	// maxReferencedRefs of each.
	slices.Sort(names)
	names = names[:min(len(names), maxReferencedRefs)]
	return fail(CodeReferenced, fmt.Sprintf("artifact %s is referenced by %d refs (%s): move or delete them first",
		name, total, strings.Join(names, ", ")), map[string]any{"refs": names})
}

// deleteVersion removes one version: its manifest, its chunks' references,
// and its artifact id's entry when it was that id's newest publication (the
// next newest version with the id, from the artifact index, takes it over).
func (f *FSM) deleteVersion(ctx *applyCtx, tenant string, m *Manifest) {
	v := versionHex(m.Version)
	f.st.Delete(artifactVersionKey(tenant, m.Name, v))
	for _, ch := range m.Chunks {
		f.unreferenceChunk(ctx, tenant, ch.Digest)
	}
	if loc, ok := getRecord[artifactLoc](f.st, artifactIDKey(tenant, m.ArtifactID)); ok && loc.Name == m.Name && loc.Version == m.Version {
		// Another version with the same content (published again after a
		// different one) takes over the id; else the id is gone.
		if newest := f.st.arts.newestWithID(tenant, m.ArtifactID); newest == 0 {
			f.st.Delete(artifactIDKey(tenant, m.ArtifactID))
		} else {
			f.st.Put(artifactIDKey(tenant, m.ArtifactID), encode(&artifactLoc{Name: m.Name, Version: newest}))
		}
	}
	f.emit(tenant, ResourceArtifacts, m.Name+"/"+v, m.Name, EventDelete, nil)
}

// unreferenceChunk counts one manifest less naming the chunk. A chunk no
// manifest names any more goes back into the GC index as if it had just
// been uploaded, so that chunk.gc collects it a grace period later: an
// upload that found it held (and so did not send it) has that long to
// publish a manifest naming it.
func (f *FSM) unreferenceChunk(ctx *applyCtx, tenant, digest string) {
	h, ok := getRecord[chunkHold](f.st, chunkHoldKey(tenant, digest))
	if !ok {
		return // the empty chunk
	}
	if h.Refs > 1 {
		h.Refs--
	} else {
		h.Refs, h.HeldAt = 0, ctx.now
		f.st.Put(chunkGCKey(h.HeldAt, tenant, digest), nil)
	}
	f.st.Put(chunkHoldKey(tenant, digest), encode(h))
}

// versionHeads is the artifact id of every version of name and the chunk
// references they hold together, read from the front of each manifest
// (manifestHead) without decoding its chunks.
func versionHeads(st *Store, tenant, name string) (ids []string, refs int) {
	st.Scan(artifactVersionsPrefix(tenant, name), "", func(_ string, v []byte) bool {
		if id, chunks, ok := manifestHead(v); ok {
			ids = append(ids, id)
			refs += chunks
		}
		return true
	})
	return ids, refs
}

// artifactVersionList is every version of a name, oldest first.
func artifactVersionList(st *Store, tenant, name string) []*Manifest {
	var out []*Manifest
	st.Scan(artifactVersionsPrefix(tenant, name), "", func(_ string, v []byte) bool {
		var m Manifest
		if decode(v, &m) == nil {
			out = append(out, &m)
		}
		return true
	})
	return out
}

func applyArtifactPolicy(f *FSM, _ *applyCtx, c *Command) *Result {
	var a ArtifactPolicyArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if !f.st.Has(tenantKey(c.Tenant)) {
		return fail(CodeNotFound, fmt.Sprintf("tenant %q not found", c.Tenant), nil)
	}
	key := artifactPolicyKey(c.Tenant, a.Prefix)
	p := &ArtifactPolicy{Prefix: a.Prefix, KeepLast: a.KeepLast}
	if a.KeepLast == 0 {
		f.st.Delete(key)
		return okValue(OutcomeOK, p)
	}
	if !f.st.Has(key) && len(artifactPolicies(f.st, c.Tenant)) >= MaxArtifactPolicies {
		return fail(CodeResourceExhausted, fmt.Sprintf("tenant %q has %d artifact policies, the most it may have", c.Tenant, MaxArtifactPolicies), nil)
	}
	f.st.Put(key, encode(p))
	if !f.st.Has(artifactPolicyMarkerKey) {
		f.st.Put(artifactPolicyMarkerKey, []byte{1})
	}
	return okValue(OutcomeOK, p)
}

// artifactPolicies lists a tenant's policies in prefix order.
func artifactPolicies(st *Store, tenant string) []*ArtifactPolicy {
	out := []*ArtifactPolicy{}
	st.Scan(artifactPolicyPrefix(tenant), "", func(_ string, v []byte) bool {
		var p ArtifactPolicy
		if decode(v, &p) == nil {
			out = append(out, &p)
		}
		return true
	})
	return out
}

// policyFor is the policy of the longest prefix of name, nil if none.
func policyFor(st *Store, tenant, name string) *ArtifactPolicy {
	var best *ArtifactPolicy
	for _, p := range artifactPolicies(st, tenant) {
		if strings.HasPrefix(name, p.Prefix) && (best == nil || len(p.Prefix) > len(best.Prefix)) {
			best = p
		}
	}
	return best
}

// trimArtifact applies name's policy after a publish: every version older
// than the newest KeepLast goes, oldest first and at most
// artifactTrimPerPublish of them, except those a ref points at. It reads
// the oldest versions only, at most artifactTrimWalk of them: a name whose
// oldest versions are that many pinned ones is trimmed no further until
// refs move.
func (f *FSM) trimArtifact(ctx *applyCtx, tenant, name string) {
	p := policyFor(f.st, tenant, name)
	if p == nil {
		return
	}
	n := uint64(f.st.arts.versionCount(tenant, name))
	if n <= p.KeepLast {
		return
	}
	old := min(n-p.KeepLast, artifactTrimWalk)
	var doomed []*Manifest
	walked := uint64(0)
	f.st.Scan(artifactVersionsPrefix(tenant, name), "", func(_ string, v []byte) bool {
		walked++
		var m Manifest
		if decode(v, &m) == nil && !f.st.arts.pinned(tenant, m.ArtifactID) {
			doomed = append(doomed, &m)
		}
		return walked < old && len(doomed) < artifactTrimPerPublish
	})
	for _, m := range doomed {
		f.deleteVersion(ctx, tenant, m)
	}
}

// ArtifactPolicies lists a tenant's artifact policies in prefix order.
func (f *FSM) ArtifactPolicies(tenant string) ([]*ArtifactPolicy, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return artifactPolicies(f.st, tenant), f.applied
}

// MaxListWalk bounds what one page of a list examines under the FSM's
// read lock, visible or not, matching or not: names for ListArtifacts and
// ListQueues, checkpoints for ListCheckpoints. A page that reaches it ends
// there with a next page token, even if it is empty: an empty page with a
// token means "keep going", never "the end".
const MaxListWalk = 10_000

// ListArtifacts lists the names starting with prefix that visible allows,
// after the name after, at most limit, each with its newest version and
// how many versions it has, in the byte order of "name/". next is the
// name to continue after when there may be more: the last name answered,
// or the last one examined when the page ends at MaxListWalk names. Each
// name costs a few lookups (the artifact index, its greatest key),
// however many versions it has.
func (f *FSM) ListArtifacts(tenant, prefix, after string, limit int, visible func(name string) bool) (out []*ArtifactSummary, next string, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	root := artifactsRoot(tenant)
	from := ""
	if after != "" {
		from = root + after + "/\xff" // past every key of after
	}
	out = []*ArtifactSummary{}
	for walked := 0; ; walked++ {
		name, ok := "", false
		f.st.Scan(root+prefix, from, func(k string, _ []byte) bool {
			name, _, ok = strings.Cut(k[len(root):], "/")
			return false
		})
		if !ok {
			return out, "", f.applied
		}
		if walked == MaxListWalk {
			return out, after, f.applied
		}
		from, after = root+name+"/\xff", name
		n := f.st.arts.versionCount(tenant, name)
		if n == 0 || (visible != nil && !visible(name)) {
			continue
		}
		if len(out) == limit {
			return out, out[len(out)-1].Name, f.applied
		}
		out = append(out, &ArtifactSummary{Name: name, Versions: n, LatestVersion: newestVersion(f.st, tenant, name)})
	}
}
