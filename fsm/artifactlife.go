package fsm

import (
	"fmt"
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
	// MaxArtifactPolicies is the most policies a tenant may have.
	MaxArtifactPolicies = 100
	// artifactTrimPerPublish is the most versions one publish trims under
	// a policy; a longer backlog (a policy set on a name that already had
	// many versions) is trimmed over the next publishes.
	artifactTrimPerPublish = 64
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
	versions := artifactVersionList(f.st, c.Tenant, a.Name)
	if a.Version != 0 {
		return f.deleteOneVersion(ctx, c.Tenant, &a, versions)
	}
	if len(versions) == 0 {
		return fail(CodeNotFound, fmt.Sprintf("artifact %q not found", a.Name), nil)
	}
	if latest := versions[len(versions)-1].Version; a.ExpectVersion != nil && *a.ExpectVersion != latest {
		return fail(CodeVersionMismatch, fmt.Sprintf("artifact %q is at version %d, not %d", a.Name, latest, *a.ExpectVersion),
			map[string]any{"current_version": latest})
	}
	if len(versions) > MaxArtifactDeleteVersions {
		return fail(CodeInvalidArgument, fmt.Sprintf("artifact %q has %d versions, more than the %d one delete removes: delete versions one by one or set a keep-last policy",
			a.Name, len(versions), MaxArtifactDeleteVersions), nil)
	}
	if r := referencedError(f.st, c.Tenant, a.Name, versions); r != nil {
		return r
	}
	for _, m := range versions {
		f.deleteVersion(ctx, c.Tenant, m)
	}
	f.st.Delete(artifactLatestKey(c.Tenant, a.Name))
	return okValue(OutcomeNoContent, nil)
}

func (f *FSM) deleteOneVersion(ctx *applyCtx, tenant string, a *ArtifactDeleteArgs, versions []*Manifest) *Result {
	var m *Manifest
	for _, v := range versions {
		if v.Version == a.Version {
			m = v
		}
	}
	if m == nil {
		return fail(CodeNotFound, fmt.Sprintf("artifact %s version %d not found", a.Name, a.Version), nil)
	}
	if a.ExpectArtifactID != nil && *a.ExpectArtifactID != m.ArtifactID {
		return fail(CodeVersionMismatch, fmt.Sprintf("artifact %s version %d is %s, not %s", a.Name, a.Version, m.ArtifactID, *a.ExpectArtifactID),
			map[string]any{"artifact_id": m.ArtifactID})
	}
	if r := referencedError(f.st, tenant, a.Name, []*Manifest{m}); r != nil {
		return r
	}
	f.deleteVersion(ctx, tenant, m)
	if len(versions) == 1 {
		// The name is gone: its next publication is version 1 again.
		f.st.Delete(artifactLatestKey(tenant, a.Name))
	}
	return okValue(OutcomeNoContent, nil)
}

// referencedError refuses to delete versions that a ref points at (by
// artifact id: a ref names an id, and deleting a version of that id could
// leave it pointing at nothing).
func referencedError(st *Store, tenant, name string, versions []*Manifest) *Result {
	ids := map[string]bool{}
	for _, m := range versions {
		ids[m.ArtifactID] = true
	}
	refs := refsTo(st, tenant, ids)
	if len(refs) == 0 {
		return nil
	}
	names := make([]string, 0, min(len(refs), maxReferencedRefs))
	for _, r := range refs[:min(len(refs), maxReferencedRefs)] {
		names = append(names, r.Ref)
	}
	return fail(CodeReferenced, fmt.Sprintf("artifact %s is referenced by %d refs (%s): move or delete them first",
		name, len(refs), strings.Join(names, ", ")), map[string]any{"refs": names})
}

// refsTo lists, in name order, the tenant's refs that point at one of ids.
// It reads every ref of the tenant: refs are few next to artifact versions,
// and an index of them by artifact would be a new record for every ref.set.
func refsTo(st *Store, tenant string, ids map[string]bool) []*Ref {
	var out []*Ref
	if len(ids) == 0 {
		return nil
	}
	st.Scan(refPrefix(tenant), "", func(_ string, v []byte) bool {
		var r Ref
		if decode(v, &r) == nil && ids[r.ArtifactID] {
			out = append(out, &r)
		}
		return true
	})
	return out
}

// deleteVersion removes one version: its manifest, its chunks' references,
// and its artifact id's entry when it was that id's newest publication.
func (f *FSM) deleteVersion(ctx *applyCtx, tenant string, m *Manifest) {
	v := versionHex(m.Version)
	f.st.Delete(artifactVersionKey(tenant, m.Name, v))
	for _, ch := range m.Chunks {
		f.unreferenceChunk(ctx, tenant, ch.Digest)
	}
	if loc, ok := getRecord[artifactLoc](f.st, artifactIDKey(tenant, m.ArtifactID)); ok && loc.Name == m.Name && loc.Version == m.Version {
		// Another version with the same content (published again after a
		// different one) takes over the id; else the id is gone.
		var newest uint64
		for _, o := range artifactVersionList(f.st, tenant, m.Name) {
			if o.ArtifactID == m.ArtifactID {
				newest = o.Version
			}
		}
		if newest == 0 {
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
// artifactTrimPerPublish of them, except those a ref points at.
func (f *FSM) trimArtifact(ctx *applyCtx, tenant, name string) {
	p := policyFor(f.st, tenant, name)
	if p == nil {
		return
	}
	versions := artifactVersionList(f.st, tenant, name)
	if uint64(len(versions)) <= p.KeepLast {
		return
	}
	old := versions[:uint64(len(versions))-p.KeepLast]
	ids := map[string]bool{}
	for _, m := range old {
		ids[m.ArtifactID] = true
	}
	pinned := map[string]bool{}
	for _, r := range refsTo(f.st, tenant, ids) {
		pinned[r.ArtifactID] = true
	}
	trimmed := 0
	for _, m := range old {
		if trimmed == artifactTrimPerPublish {
			break
		}
		if !pinned[m.ArtifactID] {
			f.deleteVersion(ctx, tenant, m)
			trimmed++
		}
	}
}

// ArtifactPolicies lists a tenant's artifact policies in prefix order.
func (f *FSM) ArtifactPolicies(tenant string) ([]*ArtifactPolicy, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return artifactPolicies(f.st, tenant), f.applied
}

// maxListWalk bounds the keys one ListArtifacts page walks once it has a
// name to answer: a page ends early, with a next cursor, rather than walk
// on through many versions.
const maxListWalk = 100_000

// ListArtifacts lists the names starting with prefix that visible allows,
// after the name after, at most limit, each with its newest version and
// how many versions it has, in the byte order of "name/". next is the last
// name answered when there may be more.
func (f *FSM) ListArtifacts(tenant, prefix, after string, limit int, visible func(name string) bool) (out []*ArtifactSummary, next string, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	root := artifactsRoot(tenant)
	from := ""
	if after != "" {
		from = root + after + "/\xff" // past every key of after
	}
	out = []*ArtifactSummary{}
	var cur *ArtifactSummary
	walked := 0
	// flush ends the current name; false when the page is full.
	flush := func() bool {
		if cur == nil || cur.Versions == 0 || (visible != nil && !visible(cur.Name)) {
			return true
		}
		if len(out) == limit || (len(out) > 0 && walked > maxListWalk) {
			next = out[len(out)-1].Name
			return false
		}
		out = append(out, cur)
		return true
	}
	done := false
	f.st.Scan(root+prefix, from, func(k string, _ []byte) bool {
		name, rest, ok := strings.Cut(k[len(root):], "/")
		if !ok {
			return true
		}
		if cur == nil || cur.Name != name {
			if !flush() {
				done = true
				return false
			}
			cur = &ArtifactSummary{Name: name}
		}
		walked++
		if v, ok := strings.CutPrefix(rest, "v/"); ok {
			cur.Versions++
			fmt.Sscanf(v, "%x", &cur.LatestVersion)
		}
		return true
	})
	if !done {
		flush()
	}
	return out, next, f.applied
}
