package fsm

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// Checkpoint blobs: channel values stored once per (channel, version) of
// a thread's namespace, as LangGraph's own savers keep them
// (checkpoint_blobs). A checkpoint names the values it holds by version
// (BlobRefs); a put brings the values whose version is new (Blobs), and
// the others are the ones an earlier checkpoint of the namespace put. A
// growing channel (a message history) is then stored once per change,
// not once per checkpoint.
//
// Keys, under the namespace's prefix <nsp>:
//
//	<nsp>b/<channel>/<version>    cpBlob (both escaped)
//
// A blob counts the checkpoints that name it (Refs) and goes with the
// last of them; a thread delete takes all of them with the thread.
//
// A large value may be held in the chunk store instead (Chunks, with
// version 6): the blob is then a reference of each of its chunks, counted
// in the thread's chunk references (threadRefsKey, MaxThreadChunkRefs)
// like a checkpoint's data_chunks, so chunk GC keeps them while the blob
// lives and gets them back when it goes. Equal values share their chunks
// (content-addressed), across versions, checkpoints and threads.

// CheckpointBlob is one channel value of a put: its serialized bytes and
// their type (LangGraph's serde: "msgpack", "json", "bytes", ...).
type CheckpointBlob struct {
	Channel, Version, Type string
	Data                   []byte
	// Chunks hold the bytes instead of Data (EntryVersion6).
	Chunks []ChunkRef `codec:",omitempty"`
}

// BlobRef names a checkpoint's value of a channel.
type BlobRef struct {
	Channel, Version string
}

// cpBlob is a blob as stored. One with Chunks puts checkpoints6MarkerKey.
type cpBlob struct {
	Type   string
	Data   []byte
	Refs   uint64
	Chunks []ChunkRef `codec:",omitempty"`
}

// BlobView is a blob as the API answers it, with a checkpoint. For a blob
// held in chunks the server reads Data from Chunks.
type BlobView struct {
	Channel string     `json:"channel"`
	Version string     `json:"version"`
	Type    string     `json:"type"`
	Data    []byte     `json:"b64"` // base64 in JSON
	Chunks  []ChunkRef `json:"chunks,omitempty"`
}

// MaxCheckpointChunkedBlobBytes bounds the bytes of the values held in
// chunks that one checkpoint names, all together: a read answers them
// whole.
const MaxCheckpointChunkedBlobBytes = 64 << 20

func chunksSize(chunks []ChunkRef) (n int64) {
	for _, c := range chunks {
		n += c.Size
	}
	return n
}

func cpBlobKey(tenant, thread, ns, channel, version string) string {
	return nsPrefix(tenant, thread, ns) + "b/" + escapeKeySegment(channel) + "/" + escapeKeySegment(version)
}

// putBlobs stores a put's new blobs and counts the checkpoint as a
// reference of each blob it names. Every named blob must exist once the
// new ones are stored; a new blob must be named (none is left
// unreferenced). A (channel, version) already stored keeps its bytes, as
// LangGraph's Postgres saver keeps them (insert if absent): LangGraph
// gives every new value a new version.
func (f *FSM) putBlobs(tenant, thread, ns string, blobs []CheckpointBlob, refs []BlobRef) *Result {
	named := make(map[BlobRef]bool, len(refs))
	for _, r := range refs {
		named[r] = true
	}
	for _, b := range blobs {
		if !named[BlobRef{Channel: b.Channel, Version: b.Version}] {
			return fail(CodeInvalidArgument, fmt.Sprintf("blob %s@%s is not in blob_versions: a checkpoint stores only the values it names", b.Channel, b.Version), nil)
		}
		key := cpBlobKey(tenant, thread, ns, b.Channel, b.Version)
		if f.st.Has(key) {
			continue
		}
		if len(b.Chunks) > 0 {
			if len(b.Data) > 0 {
				return fail(CodeInvalidArgument, fmt.Sprintf("blob %s@%s has bytes and chunks: give one", b.Channel, b.Version), nil)
			}
			if r := f.holdBlobChunks(tenant, thread, b.Chunks); r != nil {
				return r
			}
			f.markCheckpoints6()
		}
		f.st.Put(key, encode(&cpBlob{Type: b.Type, Data: b.Data, Chunks: b.Chunks}))
	}
	var missing []string
	var chunked int64
	for _, r := range refs {
		key := cpBlobKey(tenant, thread, ns, r.Channel, r.Version)
		b, ok := getRecord[cpBlob](f.st, key)
		if !ok {
			missing = append(missing, r.Channel+"@"+r.Version)
			continue
		}
		chunked += chunksSize(b.Chunks)
		b.Refs++
		f.st.Put(key, encode(b))
	}
	if chunked > MaxCheckpointChunkedBlobBytes {
		return fail(CodeResourceExhausted, fmt.Sprintf("the values held in chunks that the checkpoint names add up to %d bytes, over the %d a checkpoint may name",
			chunked, MaxCheckpointChunkedBlobBytes), nil)
	}
	if len(missing) > 0 {
		return fail(CodeInvalidArgument, fmt.Sprintf("%d values the checkpoint names are not stored in its namespace: put them in blobs", len(missing)),
			map[string]any{"missing_blobs": missing})
	}
	if len(refs) > 0 {
		f.markCheckpoints5()
	}
	return nil
}

// holdBlobChunks makes a new blob a reference of each of its chunks,
// counted in its thread's chunk references.
func (f *FSM) holdBlobChunks(tenant, thread string, chunks []ChunkRef) *Result {
	refs := threadChunkRefs(f.st, tenant, thread)
	if refs+uint64(len(chunks)) > MaxThreadChunkRefs {
		return fail(CodeResourceExhausted, fmt.Sprintf("thread %q holds %d chunk references; %d more would pass the %d a thread may hold (delete it, or use another thread)",
			thread, refs, len(chunks), MaxThreadChunkRefs), nil)
	}
	if r := f.holdCheckpointChunks(tenant, chunks); r != nil {
		return r
	}
	f.st.Put(threadRefsKey(tenant, thread), binary.BigEndian.AppendUint64(nil, refs+uint64(len(chunks))))
	return nil
}

// releaseThreadChunkRefs drops n of a thread's chunk references.
func (f *FSM) releaseThreadChunkRefs(tenant, thread string, n int) {
	cur := threadChunkRefs(f.st, tenant, thread)
	if refs := cur - min(cur, uint64(n)); refs == 0 {
		f.st.Delete(threadRefsKey(tenant, thread))
	} else {
		f.st.Put(threadRefsKey(tenant, thread), binary.BigEndian.AppendUint64(nil, refs))
	}
}

// releaseBlobs drops a deleted checkpoint's references; a blob nothing
// names any more is deleted, and releases its chunks.
func (f *FSM) releaseBlobs(ctx *applyCtx, tenant, thread, ns string, refs []BlobRef) {
	for _, r := range refs {
		key := cpBlobKey(tenant, thread, ns, r.Channel, r.Version)
		b, ok := getRecord[cpBlob](f.st, key)
		if !ok {
			continue
		}
		if b.Refs <= 1 {
			f.st.Delete(key)
			if len(b.Chunks) > 0 {
				f.releaseCheckpointChunks(ctx, tenant, b.Chunks)
				f.releaseThreadChunkRefs(tenant, thread, len(b.Chunks))
			}
			continue
		}
		b.Refs--
		f.st.Put(key, encode(b))
	}
}

// blobViews reads the blobs a checkpoint names, for an answer; nil when
// it names none.
func blobViews(st *Store, c *Checkpoint) []BlobView {
	if len(c.BlobRefs) == 0 {
		return nil
	}
	out := make([]BlobView, 0, len(c.BlobRefs))
	for _, r := range c.BlobRefs {
		if b, ok := getRecord[cpBlob](st, cpBlobKey(c.Tenant, c.Thread, c.NS, r.Channel, r.Version)); ok {
			out = append(out, BlobView{Channel: r.Channel, Version: r.Version, Type: b.Type, Data: b.Data, Chunks: b.Chunks})
		}
	}
	return out
}

// validBlobRefs reports whether refs are sorted by channel with no channel
// twice, as the server sends them (the record's bytes then depend on
// nothing but the set).
func validBlobRefs(refs []BlobRef) bool {
	return slices.IsSortedFunc(refs, func(a, b BlobRef) int { return strings.Compare(a.Channel, b.Channel) }) &&
		uniqueChannels(refs)
}

func uniqueChannels(refs []BlobRef) bool {
	for i := 1; i < len(refs); i++ {
		if refs[i].Channel == refs[i-1].Channel {
			return false
		}
	}
	return true
}

// isBlobRecordKey reports whether rest, a key after its thread's prefix,
// is a blob: b/..., or n/<ns>/b/...
func isBlobRecordKey(rest string) bool {
	_, sub := splitNS(rest)
	return strings.HasPrefix(sub, "b/")
}

// CheckpointBlobChunks is the chunks of the values a checkpoint names
// that are held in chunks (nil when none, or no such checkpoint).
func (f *FSM) CheckpointBlobChunks(tenant, thread, ns, id string) []ChunkRef {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := getCheckpoint(f.st, tenant, thread, ns, id)
	if !ok {
		return nil
	}
	var out []ChunkRef
	for _, b := range blobViews(f.st, c) {
		out = append(out, b.Chunks...)
	}
	return out
}
