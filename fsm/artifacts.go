package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/baton-dev/baton/fsm/wire"
)

// Artifact command kinds.
const (
	KindChunkHeld       Kind = "chunk.held"
	KindChunkGC         Kind = "chunk.gc"
	KindArtifactPublish Kind = "artifact.publish"
)

// EmptyDigest is the digest of the empty chunk, which every tenant holds.
const EmptyDigest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Chunk bodies live on each node's disk beside the log (server/chunkstore);
// the state machine keeps only the index:
//
//	t/<tenant>/ch/<digest>            chunkHold: this tenant holds the chunk
//	chk/<digest>                      chunkGlobal: how many tenants hold it
//	chgc/<held at>/<tenant>/<digest>  unreferenced holds, oldest first, for GC
//	t/<tenant>/art/<name>/v/<version> Manifest
//	t/<tenant>/art/<name>/latest      latest version number (16 hex)
//	t/<tenant>/aid/<artifact id>      name and version of the newest publication
type chunkHold struct {
	Size   int64
	HeldAt int64
	Refs   uint64 // manifests of this tenant naming the chunk
}

type chunkGlobal struct {
	Size    int64
	Holders uint64
}

func chunkHoldKey(tenant, digest string) string { return "t/" + tenant + "/ch/" + digest }
func chunkGlobalKey(digest string) string       { return "chk/" + digest }
func chunkGCKey(heldAt int64, tenant, digest string) string {
	return "chgc/" + hex16(heldAt) + "/" + tenant + "/" + digest
}

const (
	chunkGlobalPrefix = "chk/"
	chunkGCPrefix     = "chgc/"
)

// ChunkRef is one chunk of an artifact's content, in order. Manifests and
// checkpoints store it as it is on the wire.
type ChunkRef = wire.ChunkRef

// Manifest is an immutable artifact version.
type Manifest struct {
	ArtifactID   string          `json:"artifact_id"`
	Name         string          `json:"name"`
	Version      uint64          `json:"version"`
	Digest       string          `json:"digest"`
	Size         int64           `json:"size"`
	Chunks       []ChunkRef      `json:"chunks"`
	MediaType    string          `json:"media_type"`
	Sources      []string        `json:"sources"`
	Metadata     json.RawMessage `json:"metadata"`
	TaskID       string          `json:"task_id"`
	FencingToken uint64          `json:"fencing_token"`
	CreatedBy    string          `json:"created_by"`
	CreatedAt    string          `json:"created_at"`
}

// ChunkHeldArgs records that a majority of nodes holds a chunk's body.
type ChunkHeldArgs struct {
	Digest string
	Size   int64
}

// ChunkGCArgs collects unreferenced chunks held since before Before.
type ChunkGCArgs struct {
	Before int64
	Max    int
}

// ArtifactPublishArgs publishes a manifest. The server has checked that the
// bytes hash to Digest; Apply checks that every chunk is held and the sizes.
type ArtifactPublishArgs struct {
	Name      string
	Digest    string
	Size      int64
	Chunks    []ChunkRef
	MediaType string
	Sources   []string
	Metadata  []byte // canonical JSON
	TaskID    string
	Fence     *Fence
}

func (a *ArtifactPublishArgs) jsonFields() [][]byte { return [][]byte{a.Metadata} }

func getRecord[T any](st *Store, key string) (*T, bool) {
	raw, ok := st.Get(key)
	if !ok {
		return nil, false
	}
	var v T
	if decode(raw, &v) != nil {
		return nil, false
	}
	return &v, true
}

func applyChunkHeld(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a ChunkHeldArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if _, ok := f.st.Get(tenantKey(c.Tenant)); !ok {
		return fail(CodeNotFound, fmt.Sprintf("tenant %q not found", c.Tenant), nil)
	}
	if h, ok := getRecord[chunkHold](f.st, chunkHoldKey(c.Tenant, a.Digest)); ok {
		return okValue(OutcomeOK, map[string]any{"digest": a.Digest, "size": h.Size})
	}
	g, ok := getRecord[chunkGlobal](f.st, chunkGlobalKey(a.Digest))
	if !ok {
		g = &chunkGlobal{Size: a.Size}
	}
	g.Holders++
	f.st.Put(chunkGlobalKey(a.Digest), encode(g))
	f.st.Put(chunkHoldKey(c.Tenant, a.Digest), encode(&chunkHold{Size: a.Size, HeldAt: ctx.now}))
	f.st.Put(chunkGCKey(ctx.now, c.Tenant, a.Digest), nil)
	return okValue(OutcomeCreated, map[string]any{"digest": a.Digest, "size": a.Size})
}

// applyChunkGC drops holds that no manifest references and that are older
// than the grace period the leader computed into Before.
func applyChunkGC(f *FSM, _ *applyCtx, c *Command) *Result {
	var a ChunkGCArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	var keys []string
	f.st.Scan(chunkGCPrefix, "", func(k string, _ []byte) bool {
		if len(keys) >= a.Max || k[len(chunkGCPrefix):len(chunkGCPrefix)+16] >= hex16(a.Before) {
			return false
		}
		keys = append(keys, k)
		return true
	})
	for _, k := range keys {
		parts := strings.SplitN(k[len(chunkGCPrefix)+17:], "/", 2)
		f.st.Delete(k)
		f.st.Delete(chunkHoldKey(parts[0], parts[1]))
		if g, ok := getRecord[chunkGlobal](f.st, chunkGlobalKey(parts[1])); ok {
			if g.Holders <= 1 {
				f.st.Delete(chunkGlobalKey(parts[1]))
			} else {
				g.Holders--
				f.st.Put(chunkGlobalKey(parts[1]), encode(g))
			}
		}
	}
	return okValue(OutcomeOK, map[string]int{"collected": len(keys)})
}

func applyArtifactPublish(f *FSM, ctx *applyCtx, c *Command) *Result {
	var a ArtifactPublishArgs
	if r := decodeArgs(c, &a); r != nil {
		return r
	}
	if r := checkFence(f.st, c, a.Fence); r != nil {
		return r
	}
	if r := f.checkChunks(c.Tenant, &a); r != nil {
		return r
	}
	m := &Manifest{Name: a.Name, Digest: a.Digest, Size: a.Size, Chunks: a.Chunks, MediaType: a.MediaType,
		Sources: a.Sources, Metadata: jsonOrEmpty(a.Metadata), TaskID: a.TaskID, CreatedBy: c.Principal}
	if m.Sources == nil {
		m.Sources = []string{}
	}
	if m.Chunks == nil {
		m.Chunks = []ChunkRef{}
	}
	m.ArtifactID = artifactID(m)
	latest, _ := f.st.Get(artifactLatestKey(c.Tenant, a.Name))
	if len(latest) > 0 {
		if prev, ok := getRecord[Manifest](f.st, artifactVersionKey(c.Tenant, a.Name, string(latest))); ok && prev.ArtifactID == m.ArtifactID {
			return okValue(OutcomeOK, prev) // a retried publish never makes a twin
		}
	}
	var version uint64 = 1
	if len(latest) > 0 {
		_, _ = fmt.Sscanf(string(latest), "%x", &version)
		version++
	}
	m.Version, m.CreatedAt = version, FormatMillis(ctx.now)
	if a.Fence != nil {
		m.FencingToken = a.Fence.Token
	}
	f.storeManifest(c.Tenant, m)
	f.trimArtifact(ctx, c.Tenant, m.Name) // a keep-last policy (artifactlife.go)
	return okValue(OutcomeCreated, m)
}

func (f *FSM) storeManifest(tenant string, m *Manifest) {
	v := fmt.Sprintf("%016x", m.Version)
	f.st.Put(artifactVersionKey(tenant, m.Name, v), encode(m))
	f.st.Put(artifactLatestKey(tenant, m.Name), []byte(v))
	f.st.Put(artifactIDKey(tenant, m.ArtifactID), encode(&artifactLoc{Name: m.Name, Version: m.Version}))
	for _, ch := range m.Chunks {
		f.referenceChunk(tenant, ch.Digest)
	}
	f.emit(tenant, ResourceArtifacts, m.Name+"/"+v, m.Name, EventPut, m)
}

// referenceChunk counts one more manifest naming the chunk; a referenced
// chunk leaves the GC index for good (manifests are immutable).
func (f *FSM) referenceChunk(tenant, digest string) {
	h, ok := getRecord[chunkHold](f.st, chunkHoldKey(tenant, digest))
	if !ok {
		return // the empty chunk
	}
	if h.Refs == 0 {
		f.st.Delete(chunkGCKey(h.HeldAt, tenant, digest))
	}
	h.Refs++
	f.st.Put(chunkHoldKey(tenant, digest), encode(h))
}

func (f *FSM) checkChunks(tenant string, a *ArtifactPublishArgs) *Result {
	var missing []string
	var total int64
	for i, ch := range a.Chunks {
		total += ch.Size
		if ch.Digest == EmptyDigest && ch.Size == 0 {
			continue
		}
		h, ok := getRecord[chunkHold](f.st, chunkHoldKey(tenant, ch.Digest))
		if !ok {
			missing = append(missing, ch.Digest)
			continue
		}
		if h.Size != ch.Size {
			return fail(CodeInvalidArgument, fmt.Sprintf("chunks[%d] has size %d, the held chunk %d", i, ch.Size, h.Size), nil)
		}
	}
	if len(missing) > 0 {
		return fail(CodeMissingChunks, fmt.Sprintf("%d chunks are not held by this tenant", len(missing)),
			map[string]any{"missing": missing})
	}
	if total != a.Size {
		return fail(CodeInvalidArgument, fmt.Sprintf("chunk sizes add up to %d, not size %d", total, a.Size), nil)
	}
	return nil
}

type artifactLoc struct {
	Name    string
	Version uint64
}

func artifactPrefix(tenant, name string) string { return "t/" + tenant + "/art/" + name + "/" }
func artifactVersionKey(tenant, name, v string) string {
	return artifactPrefix(tenant, name) + "v/" + v
}
func artifactLatestKey(tenant, name string) string { return artifactPrefix(tenant, name) + "latest" }
func artifactIDKey(tenant, id string) string       { return "t/" + tenant + "/aid/" + id }

// artifactID is the digest of the canonical manifest without version,
// created_* and fencing_token (docs/api.md).
func artifactID(m *Manifest) string {
	canon := struct {
		Chunks    []ChunkRef      `json:"chunks"`
		Digest    string          `json:"digest"`
		MediaType string          `json:"media_type"`
		Metadata  json.RawMessage `json:"metadata"`
		Name      string          `json:"name"`
		Size      int64           `json:"size"`
		Sources   []string        `json:"sources"`
		TaskID    string          `json:"task_id"`
	}{m.Chunks, m.Digest, m.MediaType, jsonOrEmpty(m.Metadata), m.Name, m.Size, m.Sources, m.TaskID}
	if canon.Sources == nil {
		canon.Sources = []string{}
	}
	sum := sha256.Sum256(mustJSON(&canon))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ChunksHeld reports which of the digests the tenant does not hold.
func (f *FSM) ChunksHeld(tenant string, digests []string) (missing []string, index uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	missing = []string{}
	for _, d := range digests {
		if d == EmptyDigest {
			continue
		}
		if _, ok := f.st.Get(chunkHoldKey(tenant, d)); !ok {
			missing = append(missing, d)
		}
	}
	return missing, f.applied
}

// ChunkKnown reports whether any tenant holds the chunk (a node should have
// its body) and its size.
func (f *FSM) ChunkKnown(digest string) (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g, ok := getRecord[chunkGlobal](f.st, chunkGlobalKey(digest))
	if !ok {
		return 0, digest == EmptyDigest
	}
	return g.Size, true
}

// AllChunks lists every chunk some tenant holds, in digest order.
func (f *FSM) AllChunks() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []string
	f.st.Scan(chunkGlobalPrefix, "", func(k string, _ []byte) bool {
		out = append(out, k[len(chunkGlobalPrefix):])
		return true
	})
	return out
}

// OldestUnreferencedChunk is the hold time of the oldest unreferenced chunk, 0 if none.
func (f *FSM) OldestUnreferencedChunk() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var t int64
	f.st.Scan(chunkGCPrefix, "", func(k string, _ []byte) bool {
		_, _ = fmt.Sscanf(k[len(chunkGCPrefix):len(chunkGCPrefix)+16], "%x", &t)
		return false
	})
	return t
}

// ArtifactVersion returns one version (0: the latest).
func (f *FSM) ArtifactVersion(tenant, name string, version uint64) (*Manifest, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v := fmt.Sprintf("%016x", version)
	if version == 0 {
		latest, ok := f.st.Get(artifactLatestKey(tenant, name))
		if !ok {
			return nil, f.applied, false
		}
		v = string(latest)
	}
	m, ok := getRecord[Manifest](f.st, artifactVersionKey(tenant, name, v))
	return m, f.applied, ok
}

// ArtifactVersions lists a name's versions, oldest first.
func (f *FSM) ArtifactVersions(tenant, name string) ([]*Manifest, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := []*Manifest{}
	f.st.Scan(artifactPrefix(tenant, name)+"v/", "", func(_ string, v []byte) bool {
		var m Manifest
		if decode(v, &m) == nil {
			out = append(out, &m)
		}
		return true
	})
	return out, f.applied
}

// ArtifactByID returns the newest publication of an artifact id.
// ChunkReferenced reports whether some artifact version of the tenant names
// the chunk.
func (f *FSM) ChunkReferenced(tenant, digest string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h, ok := getRecord[chunkHold](f.st, chunkHoldKey(tenant, digest))
	return ok && h.Refs > 0
}

// ChunksInArtifacts returns which of digests are named by some version of
// an artifact whose name starts with namePrefix and for which visible(name)
// is true. It reads every such version: the caller bounds namePrefix.
func (f *FSM) ChunksInArtifacts(tenant, namePrefix string, digests map[string]bool, visible func(name string) bool) map[string]bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	found := map[string]bool{}
	root := "t/" + tenant + "/art/"
	f.st.Scan(root+namePrefix, "", func(k string, v []byte) bool {
		name, rest, ok := strings.Cut(k[len(root):], "/")
		if !ok || !strings.HasPrefix(rest, "v/") || !visible(name) {
			return true
		}
		var m Manifest
		if decode(v, &m) != nil {
			return true
		}
		for _, ch := range m.Chunks {
			if digests[ch.Digest] {
				found[ch.Digest] = true
			}
		}
		return len(found) < len(digests)
	})
	return found
}

func (f *FSM) ArtifactByID(tenant, id string) (*Manifest, uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	m, ok := artifactByID(f.st, tenant, id)
	return m, f.applied, ok
}

func artifactByID(st *Store, tenant, id string) (*Manifest, bool) {
	loc, ok := getRecord[artifactLoc](st, artifactIDKey(tenant, id))
	if !ok {
		return nil, false
	}
	return getRecord[Manifest](st, artifactVersionKey(tenant, loc.Name, fmt.Sprintf("%016x", loc.Version)))
}
