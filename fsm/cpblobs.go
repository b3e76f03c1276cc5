package fsm

import (
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

// CheckpointBlob is one channel value of a put: its serialized bytes and
// their type (LangGraph's serde: "msgpack", "json", "bytes", ...).
type CheckpointBlob struct {
	Channel, Version, Type string
	Data                   []byte
}

// BlobRef names a checkpoint's value of a channel.
type BlobRef struct {
	Channel, Version string
}

// cpBlob is a blob as stored.
type cpBlob struct {
	Type string
	Data []byte
	Refs uint64
}

// BlobView is a blob as the API answers it, with a checkpoint.
type BlobView struct {
	Channel string `json:"channel"`
	Version string `json:"version"`
	Type    string `json:"type"`
	Data    []byte `json:"b64"` // base64 in JSON
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
		f.st.Put(key, encode(&cpBlob{Type: b.Type, Data: b.Data}))
	}
	var missing []string
	for _, r := range refs {
		key := cpBlobKey(tenant, thread, ns, r.Channel, r.Version)
		b, ok := getRecord[cpBlob](f.st, key)
		if !ok {
			missing = append(missing, r.Channel+"@"+r.Version)
			continue
		}
		b.Refs++
		f.st.Put(key, encode(b))
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

// releaseBlobs drops a deleted checkpoint's references; a blob nothing
// names any more is deleted.
func (f *FSM) releaseBlobs(tenant, thread, ns string, refs []BlobRef) {
	for _, r := range refs {
		key := cpBlobKey(tenant, thread, ns, r.Channel, r.Version)
		b, ok := getRecord[cpBlob](f.st, key)
		if !ok {
			continue
		}
		if b.Refs <= 1 {
			f.st.Delete(key)
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
			out = append(out, BlobView{Channel: r.Channel, Version: r.Version, Type: b.Type, Data: b.Data})
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
