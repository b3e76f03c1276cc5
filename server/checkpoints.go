package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// Bounds of the checkpoint API (docs/api.md "Checkpoints").
const (
	maxThreadIDBytes      = 256  // a thread id, in bytes of UTF-8
	maxCheckpointNSBytes  = 512  // a checkpoint namespace
	maxCheckpointFilter   = 4096 // the filter query parameter, in bytes
	maxCheckpointChunks   = 1024 // data_chunks of one checkpoint
	checkpointNSParameter = "checkpoint_ns"
)

func (s *Server) checkpointRoutes(add addRoute) {
	base := "/v1/tenants/{tenant}/threads/{thread}"
	add("PUT", base+"/checkpoints/{id}", routeWrite, s.handleCheckpointPut, cmd(wire.CheckpointPut{}, fsm.KindCheckpointPut))
	add("GET", base+"/checkpoints/{id}", routeRead, s.handleCheckpointGet)
	add("GET", base+"/checkpoints", routeRead, s.handleCheckpointList)
	add("PUT", base+"/checkpoints/{id}/writes/{task_id}", routeWrite, s.handleCheckpointWrites, cmd(wire.CheckpointWrites{}, fsm.KindCheckpointWrites))
	add("DELETE", base, routeWrite, s.handleThreadDelete, cmd(wire.ThreadDelete{}, fsm.KindThreadDelete))
}

// validText checks a thread id or checkpoint namespace: valid UTF-8
// without control characters, min to max bytes. Such ids are escaped in
// the state's keys (fsm.escapeKeySegment) and percent-encoded in paths.
func validText(what, s string, min, max int) error {
	if len(s) < min || len(s) > max {
		return badRequest("%s must be %d to %d bytes of UTF-8, not %d", what, min, max, len(s))
	}
	if !utf8.ValidString(s) {
		return badRequest("%s %q is not valid UTF-8", what, s)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return badRequest("%s %q has a control character (U+%04X) at byte %d", what, s, r, i)
		}
	}
	return nil
}

// checkpointNS is the request's checkpoint_ns query parameter: "" (the
// default namespace) when absent; given twice it is refused.
func checkpointNS(r *http.Request) (string, error) {
	vals := r.URL.Query()[checkpointNSParameter]
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
		return vals[0], validText(checkpointNSParameter, vals[0], 0, maxCheckpointNSBytes)
	}
	return "", badRequest("%s is given %d times; give it once", checkpointNSParameter, len(vals))
}

// cpScope is the thread namespace a checkpoint request is about.
type cpScope struct{ tenant, thread, ns string }

// threadAccess validates the thread id and namespace and authorizes action
// on the thread (grants name threads, whatever the namespace).
func (s *Server) threadAccess(id *identity, r *http.Request, action string) (cpScope, error) {
	sc := cpScope{tenant: r.PathValue("tenant"), thread: r.PathValue("thread")}
	if err := validText("thread id", sc.thread, 1, maxThreadIDBytes); err != nil {
		return sc, err
	}
	var err error
	if sc.ns, err = checkpointNS(r); err != nil {
		return sc, err
	}
	return sc, s.tenantAccess(id, sc.tenant, resCheckpoints, sc.thread, action)
}

func (s *Server) handleCheckpointPut(w http.ResponseWriter, r *http.Request, id *identity) error {
	cpID := r.PathValue("id")
	if err := validName("checkpoint id", cpID); err != nil {
		return err
	}
	if cpID == "latest" {
		return badRequest(`"latest" is reserved and cannot be a checkpoint id`)
	}
	sc, err := s.threadAccess(id, r, actWrite)
	if err != nil {
		return err
	}
	req, body, err := s.readCheckpointPut(w, r)
	if err != nil {
		return err
	}
	args, err := checkpointPutArgs(req, cpID, s.cfg.MaxCheckpointBytes)
	if err != nil {
		return err
	}
	args.Thread, args.NS = sc.thread, sc.ns
	if len(args.Chunks) > 0 {
		if err := s.checkCheckpointChunks(r, id, sc, args); err != nil {
			return err
		}
	}
	if err := s.checkBlobChunks(id, sc, args); err != nil {
		return err
	}
	res, err := s.propose(r, id, sc.tenant, fsm.KindCheckpointPut, args, body)
	if err != nil {
		return err
	}
	return replyCheckpoint(w, r, res, false)
}

func checkpointPutArgs(req *wire.CheckpointPut, cpID string, maxBytes int64) (*fsm.CheckpointPutArgs, error) {
	switch {
	case len(req.Data) == 0 && req.DataChunks == nil:
		return nil, badRequest("data is required (any JSON value), or data_chunks for data held in chunks")
	case len(req.Data) > 0 && req.DataChunks != nil:
		return nil, badRequest("give data or data_chunks, not both")
	}
	a := &fsm.CheckpointPutArgs{ID: cpID, Fork: req.Fork}
	if req.ParentID != nil {
		if err := validName("parent_id", *req.ParentID); err != nil {
			return nil, err
		}
		a.ParentID = *req.ParentID
	}
	var err error
	if a.Chunks, err = checkpointChunks("data_chunks", req.DataChunks, maxBytes); err != nil {
		return nil, err
	}
	if a.Data, err = compactJSON("data", req.Data); err != nil {
		return nil, err
	}
	if a.Metadata, err = compactJSON("metadata", req.Metadata); err != nil {
		return nil, err
	}
	a.RunID = runIDOf(a.Metadata)
	if a.Blobs, a.BlobRefs, err = checkpointBlobs(req, maxBytes); err != nil {
		return nil, err
	}
	a.Fence, err = fenceArg(req.Fence)
	return a, err
}

// Bounds of a checkpoint's blobs (docs/api.md "Checkpoints").
const (
	maxCheckpointBlobRefs = 4096 // channels a checkpoint names
	maxBlobVersionBytes   = 256
	maxBlobTypeBytes      = 64
)

// checkpointBlobs validates blob_versions and blobs: the values a
// checkpoint names, sorted by channel for the command, and the new ones,
// each named by blob_versions, with its bytes or the chunks that hold
// them (data_chunks' bounds for each, maxCheckpointChunks in all).
func checkpointBlobs(req *wire.CheckpointPut, maxBytes int64) ([]fsm.CheckpointBlob, []fsm.BlobRef, error) {
	if len(req.BlobVersions) > maxCheckpointBlobRefs {
		return nil, nil, badRequest("blob_versions names %d channels; at most %d", len(req.BlobVersions), maxCheckpointBlobRefs)
	}
	refs := make([]fsm.BlobRef, 0, len(req.BlobVersions))
	for ch, v := range req.BlobVersions {
		if err := validText("blob_versions channel", ch, 1, maxWriteChannelBytes); err != nil {
			return nil, nil, err
		}
		if err := validText("blob_versions["+strconv.Quote(ch)+"]", v, 1, maxBlobVersionBytes); err != nil {
			return nil, nil, err
		}
		refs = append(refs, fsm.BlobRef{Channel: ch, Version: v})
	}
	slices.SortFunc(refs, func(a, b fsm.BlobRef) int { return strings.Compare(a.Channel, b.Channel) })
	blobs := make([]fsm.CheckpointBlob, len(req.Blobs))
	chunks := len(req.DataChunks)
	for i, b := range req.Blobs {
		at := "blobs[" + strconv.Itoa(i) + "]"
		if v, ok := req.BlobVersions[b.Channel]; !ok || v != b.Version {
			return nil, nil, badRequest("%s (%s@%s) is not a value blob_versions names", at, b.Channel, b.Version)
		}
		if err := validText(at+".type", b.Type, 1, maxBlobTypeBytes); err != nil {
			return nil, nil, err
		}
		if b.Chunks != nil {
			if b.Data != nil {
				return nil, nil, badRequest("%s has b64 and chunks: give the bytes, or the chunks that hold them", at)
			}
			cs, err := checkpointChunks(at+".chunks", b.Chunks, maxBytes)
			if err != nil {
				return nil, nil, err
			}
			if chunks += len(cs); chunks > maxCheckpointChunks {
				return nil, nil, badRequest("a put names %d chunks or more (data_chunks and blobs' chunks); at most %d", chunks, maxCheckpointChunks)
			}
			blobs[i] = fsm.CheckpointBlob{Channel: b.Channel, Version: b.Version, Type: b.Type, Chunks: cs}
			continue
		}
		if b.Data == nil {
			return nil, nil, badRequest("%s.b64 is required (the value's bytes, base64), or chunks", at)
		}
		blobs[i] = fsm.CheckpointBlob{Channel: b.Channel, Version: b.Version, Type: b.Type, Data: b.Data}
	}
	return blobs, refs, nil
}

// checkpointChunks validates data_chunks (or a blob's chunks, what names
// them): 1 to maxCheckpointChunks chunks of 1 byte to 4 MiB, maxBytes in
// all.
func checkpointChunks(what string, chunks []fsm.ChunkRef, maxBytes int64) ([]fsm.ChunkRef, error) {
	if chunks == nil {
		return nil, nil
	}
	if len(chunks) == 0 || len(chunks) > maxCheckpointChunks {
		return nil, badRequest("%s must hold 1 to %d chunks, not %d", what, maxCheckpointChunks, len(chunks))
	}
	var total int64
	for i, c := range chunks {
		if err := validDigest(what+"["+strconv.Itoa(i)+"].digest", c.Digest); err != nil {
			return nil, err
		}
		if c.Size < 1 || c.Size > 4<<20 {
			return nil, badRequest("%s[%d].size must be 1 byte to 4 MiB, not %d", what, i, c.Size)
		}
		total += c.Size
	}
	if total > maxBytes {
		return nil, errorf(codeTooLarge, "%s add up to %d bytes, over the %d byte limit of a checkpoint", what, total, maxBytes)
	}
	return chunks, nil
}

// checkBlobChunks checks, before proposing, that the tenant holds the
// chunks of the put's values held in chunks and that the caller may name
// them (mayNameCheckpointChunks: a chunk of a value the parent or the
// head holds is near).
func (s *Server) checkBlobChunks(id *identity, sc cpScope, a *fsm.CheckpointPutArgs) error {
	var chunks []fsm.ChunkRef
	for _, b := range a.Blobs {
		chunks = append(chunks, b.Chunks...)
	}
	if len(chunks) == 0 {
		return nil
	}
	if missing, _ := s.fsm.ChunksHeld(sc.tenant, chunkDigests(chunks)); len(missing) > 0 {
		return &apiError{Code: fsm.CodeMissingChunks, Message: strconv.Itoa(len(missing)) + " chunks of blobs are not held by this tenant",
			Details: map[string]any{"missing": missing}}
	}
	return s.mayNameCheckpointChunks(id, sc, a.ParentID, chunks)
}

// readBlobChunks fills in the bytes of the values held in chunks that the
// checkpoints name, read one chunk at a time (verified by the chunk
// plane); the answer carries them as it carries any value's. The store
// bounds them: fsm.MaxCheckpointChunkedBlobBytes a checkpoint, and a list
// page's bytes. They stay in memory until the answer is written, so they
// are held from the node's budget (Config.MaxBlobReadBytes) until the
// caller calls release: when it has no room for them now, 503 unavailable
// (Retry-After), nothing read; a request that needs more than the whole
// budget takes all of it.
func (s *Server) readBlobChunks(r *http.Request, views []fsm.CheckpointView) (release func(), err error) {
	var total int64
	for i := range views {
		for _, b := range views[i].Blobs {
			total += chunksTotal(b.Chunks)
		}
	}
	if total == 0 {
		return func() {}, nil
	}
	hold := min(total, s.cfg.MaxBlobReadBytes)
	if !s.blobReads.TryAcquire(hold) {
		return nil, errorf(codeUnavailable, "this node is building other answers with checkpoint values read from chunks, up to its bound (--max-blob-read-bytes, %d bytes); retry", s.cfg.MaxBlobReadBytes)
	}
	release = func() { s.blobReads.Release(hold) }
	for i := range views {
		for j := range views[i].Blobs {
			b := &views[i].Blobs[j]
			if len(b.Chunks) == 0 {
				continue
			}
			data := make([]byte, 0, chunksTotal(b.Chunks))
			for _, c := range b.Chunks {
				body, err := s.readChunk(r.Context(), c.Digest)
				if err != nil {
					release()
					return nil, err
				}
				data = append(data, body...)
			}
			b.Data = data
		}
	}
	return release, nil
}

func chunksTotal(chunks []fsm.ChunkRef) (n int64) {
	for _, c := range chunks {
		n += c.Size
	}
	return n
}

// checkCheckpointChunks checks, before proposing, that the tenant holds
// every chunk, that the caller may read each (naming a chunk in a
// checkpoint would let it read the chunk back), and that the chunks'
// bytes, in order, are one JSON text: what a GET answers as data. Each
// chunk must be the size the request gives it (which the state machine
// checks too), so the bytes read are at most the sizes' sum, which
// checkpointChunks bounded: a request naming one large chunk many times
// with a size of 1 stops at the first.
func (s *Server) checkCheckpointChunks(r *http.Request, id *identity, sc cpScope, a *fsm.CheckpointPutArgs) error {
	if missing, _ := s.fsm.ChunksHeld(sc.tenant, chunkDigests(a.Chunks)); len(missing) > 0 {
		return &apiError{Code: fsm.CodeMissingChunks, Message: strconv.Itoa(len(missing)) + " chunks are not held by this tenant",
			Details: map[string]any{"missing": missing}}
	}
	if err := s.mayNameCheckpointChunks(id, sc, a.ParentID, a.Chunks); err != nil {
		return err
	}
	data := make([]byte, 0, chunksTotal(a.Chunks))
	for i, c := range a.Chunks {
		body, err := s.readChunk(r.Context(), c.Digest)
		if err != nil {
			return err
		}
		if int64(len(body)) != c.Size {
			return badRequest("data_chunks[%d] has size %d, the chunk holds %d bytes", i, c.Size, len(body))
		}
		data = append(data, body...)
	}
	if err := checkJSONText(data); err != nil {
		return badRequest("data_chunks: the content is not a JSON text of valid UTF-8: %v", err)
	}
	return nil
}

// mayNameCheckpointChunks: a checkpoint may name a chunk that nothing
// names yet (an upload on its way), a chunk of its parent or of its
// namespace's head when the caller may read the thread (consecutive
// checkpoints share most chunks), or a chunk the caller could read
// through an artifact (mayReadChunks). Otherwise a narrow grant could
// read any chunk of the tenant by naming its digest.
func (s *Server) mayNameCheckpointChunks(id *identity, sc cpScope, parentID string, chunks []fsm.ChunkRef) error {
	var need []fsm.ChunkRef
	for _, c := range chunks {
		if s.fsm.ChunkReferenced(sc.tenant, c.Digest) {
			need = append(need, c)
		}
	}
	if len(need) == 0 {
		return nil
	}
	if id.allow(sc.tenant, resCheckpoints, sc.thread, actRead) == nil {
		near := map[string]bool{}
		for _, cp := range []string{parentID, s.fsm.ThreadHead(sc.tenant, sc.thread, sc.ns)} {
			for _, c := range s.fsm.CheckpointChunks(sc.tenant, sc.thread, sc.ns, cp) {
				near[c.Digest] = true
			}
			for _, c := range s.fsm.CheckpointBlobChunks(sc.tenant, sc.thread, sc.ns, cp) {
				near[c.Digest] = true
			}
		}
		rest := need[:0]
		for _, c := range need {
			if !near[c.Digest] {
				rest = append(rest, c)
			}
		}
		if need = rest; len(need) == 0 {
			return nil
		}
	}
	if s.mayReadChunks(id, sc.tenant, need) != nil {
		return errorf(fsm.CodeForbidden, "principal %q may not read chunk %s: a checkpoint may name chunks nothing names yet, "+
			"chunks of its parent or its namespace's head (with a read grant on the thread), or chunks of artifacts the caller may read",
			id.principal, need[0].Digest)
	}
	return nil
}

func (s *Server) handleCheckpointGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	sc, err := s.threadAccess(id, r, actRead)
	if err != nil {
		return err
	}
	cpID := r.PathValue("id")
	if cpID == "latest" {
		if cpID = s.fsm.ThreadHead(sc.tenant, sc.thread, sc.ns); cpID == "" {
			return errorf(fsm.CodeNotFound, "thread %q%s has no checkpoint", sc.thread, nsText(sc.ns))
		}
	} else if err := validName("checkpoint id", cpID); err != nil {
		return err
	}
	v, index, ok := s.fsm.GetCheckpoint(sc.tenant, sc.thread, sc.ns, cpID)
	if !ok {
		return errorf(fsm.CodeNotFound, "checkpoint %q not found in thread %q%s", cpID, sc.thread, nsText(sc.ns))
	}
	release, err := s.readBlobChunks(r, []fsm.CheckpointView{*v})
	if err != nil {
		return err
	}
	defer release()
	if len(v.Chunks) > 0 { // JSON, whatever Accept says (docs/api.md)
		return s.writeCheckpointStreamed(w, r, v, index)
	}
	return s.readReplyCheckpoints(w, r, index, []fsm.CheckpointView{*v}, "", true)
}

// nsText names a namespace in a message ("" for the default one).
func nsText(ns string) string {
	if ns == "" {
		return ""
	}
	return " (" + checkpointNSParameter + " " + strconv.Quote(ns) + ")"
}

// writeCheckpointStreamed answers a checkpoint whose data is held in
// chunks with the data in place, read one chunk at a time: the JSON of
// the checkpoint with data null, split at the data member, around the
// chunks' bytes (checked to be one JSON text when the checkpoint was put).
// Every member before data is a string, so the first `,"data":null` is
// that member (a string holds its quotes escaped).
func (s *Server) writeCheckpointStreamed(w http.ResponseWriter, r *http.Request, v *fsm.CheckpointView, index uint64) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	const member = `,"data":null`
	at := bytes.Index(b, []byte(member))
	if at < 0 {
		return errorf("internal", "checkpoint JSON without a data member")
	}
	head, tail := b[:at+len(member)-len("null")], b[at+len(member):]
	var size int64
	for _, c := range v.Chunks {
		size += c.Size
	}
	first, err := s.readChunk(r.Context(), v.Chunks[0].Digest) // fail cleanly before the headers go out
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.FormatInt(int64(len(head)+len(tail)+1)+size, 10))
	setIndex(w, index)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	if _, err := w.Write(head); err != nil {
		return nil
	}
	for i, c := range v.Chunks {
		body := first
		if i > 0 {
			if body, err = s.readChunk(r.Context(), c.Digest); err != nil {
				s.log.Warn("checkpoint read cut short", "thread", v.Thread, "checkpoint", v.ID, "chunk", c.Digest, "err", err)
				panic(http.ErrAbortHandler) // the client sees a truncated body, never wrong bytes
			}
		}
		if _, err := w.Write(body); err != nil {
			return nil
		}
	}
	w.Write(tail)
	w.Write([]byte("\n"))
	return nil
}

func (s *Server) handleCheckpointList(w http.ResponseWriter, r *http.Request, id *identity) error {
	sc, err := s.threadAccess(id, r, actRead)
	if err != nil {
		return err
	}
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	before, token, err := checkpointListFrom(r)
	if err != nil {
		return err
	}
	match, err := metadataFilter(r)
	if err != nil {
		return err
	}
	writes, err := boolParam(r, "pending_writes")
	if err != nil {
		return err
	}
	list, next, index, ok := s.fsm.ListCheckpoints(sc.tenant, sc.thread, sc.ns, before, limit, match, writes)
	release, err := s.readBlobChunks(r, list)
	if err != nil {
		return err
	}
	defer release()
	switch {
	case !ok && token:
		return errorf(fsm.CodeNotFound, "checkpoint %q, where the page token continues, is no longer in thread %q%s: list again", before, sc.thread, nsText(sc.ns))
	case !ok: // LangGraph's list(before=) of an unknown checkpoint: nothing
		return s.readReplyCheckpoints(w, r, index, []fsm.CheckpointView{}, "", false)
	}
	nextToken := ""
	if next != "" {
		// Only when more may follow: the answers of a whole list stay
		// what they were before pages had a bound.
		nextToken = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	return s.readReplyCheckpoints(w, r, index, list, nextToken, false)
}

// checkpointListFrom is where a checkpoint list starts: before (a
// checkpoint id), or page_token, a previous page's next_page_token (the id
// of the last checkpoint it examined, encoded), not both; token says it
// came from page_token.
func checkpointListFrom(r *http.Request) (from string, token bool, err error) {
	q := r.URL.Query()
	before := q.Get("before")
	if q.Get("page_token") != "" {
		if before != "" {
			return "", false, badRequest("give before or page_token, not both")
		}
		b, err := base64.RawURLEncoding.DecodeString(q.Get("page_token"))
		if err != nil || validName("page_token", string(b)) != nil {
			return "", false, badRequest("page_token is not one this server returned")
		}
		return string(b), true, nil
	}
	if before != "" {
		if err := validName("before", before); err != nil {
			return "", false, err
		}
	}
	return before, false, nil
}

// boolParam reads an optional true/false query parameter (false when
// absent).
func boolParam(r *http.Request, name string) (bool, error) {
	vals := r.URL.Query()[name]
	switch {
	case len(vals) == 0:
		return false, nil
	case len(vals) == 1 && (vals[0] == "true" || vals[0] == "false"):
		return vals[0] == "true", nil
	}
	return false, badRequest("%s must be given once, as true or false", name)
}

// metadataFilter reads the filter query parameter: a JSON object whose
// every member the metadata must have, with an equal value (LangGraph's
// list(filter=...)). Values compare as JSON values: objects by members,
// arrays by elements, numbers by value. nil when there is no filter.
func metadataFilter(r *http.Request) (func([]byte) bool, error) {
	vals := r.URL.Query()["filter"]
	switch {
	case len(vals) == 0:
		return nil, nil
	case len(vals) > 1:
		return nil, badRequest("filter is given %d times; give one JSON object", len(vals))
	case len(vals[0]) > maxCheckpointFilter:
		return nil, badRequest("filter is over %d bytes", maxCheckpointFilter)
	}
	var raw map[string]json.RawMessage
	if err := decodeStrict([]byte(vals[0]), &raw); err != nil || raw == nil {
		return nil, badRequest(`filter must be a JSON object of metadata members to match, such as {"source":"loop"}, not %q`, vals[0])
	}
	want := make(map[string]any, len(raw))
	for k, v := range raw {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, badRequest("filter member %q: %v", k, err)
		}
		want[k] = x
	}
	if len(want) == 0 {
		return nil, nil
	}
	return func(metadata []byte) bool {
		var md map[string]any
		if json.Unmarshal(metadata, &md) != nil {
			return false // not an object: it has no members
		}
		for k, x := range want {
			if v, ok := md[k]; !ok || !reflect.DeepEqual(v, x) {
				return false
			}
		}
		return true
	}, nil
}

func (s *Server) handleCheckpointWrites(w http.ResponseWriter, r *http.Request, id *identity) error {
	cpID, taskID := r.PathValue("id"), r.PathValue("task_id")
	if err := validName("checkpoint id", cpID); err != nil {
		return err
	}
	if err := validName("task_id", taskID); err != nil {
		return err
	}
	sc, err := s.threadAccess(id, r, actWrite)
	if err != nil {
		return err
	}
	req, body, err := s.readCheckpointWrites(w, r)
	if err != nil {
		return err
	}
	args, err := checkpointWritesArgs(req)
	if err != nil {
		return err
	}
	args.Thread, args.NS, args.ID, args.TaskID = sc.thread, sc.ns, cpID, taskID
	res, err := s.propose(r, id, sc.tenant, fsm.KindCheckpointWrites, args, body)
	if err != nil {
		return err
	}
	return replyCheckpoint(w, r, res, true)
}

// Bounds of pending writes (docs/api.md "Checkpoints").
const (
	maxWriteChannelBytes = 512
	maxTaskPathBytes     = 1024
	maxWriteIdx          = 1 << 31
)

// checkpointWritesArgs validates a pending-writes body: each write a
// channel and a JSON value, at its idx or its position.
func checkpointWritesArgs(req *wire.CheckpointWrites) (*fsm.CheckpointWritesArgs, error) {
	if req.Writes == nil {
		return nil, badRequest(`writes is required: an array of {"channel", "value", "idx"?}`)
	}
	if err := validText("task_path", req.TaskPath, 0, maxTaskPathBytes); err != nil {
		return nil, err
	}
	a := &fsm.CheckpointWritesArgs{TaskPath: req.TaskPath, Entries: make([]fsm.CheckpointWrite, len(req.Writes))}
	for i, wr := range req.Writes {
		at := "writes[" + strconv.Itoa(i) + "]"
		if err := validText(at+".channel", wr.Channel, 1, maxWriteChannelBytes); err != nil {
			return nil, err
		}
		idx := int64(i)
		if wr.Idx != nil {
			idx = *wr.Idx
		}
		if idx < -maxWriteIdx || idx >= maxWriteIdx {
			return nil, badRequest("%s.idx must be %d to %d, not %d", at, -maxWriteIdx, maxWriteIdx-1, idx)
		}
		if wr.Type != "" || wr.Data != nil { // bytes of a serializer's type
			if len(wr.Value) > 0 && string(wr.Value) != "null" { // null: absent, as encoders write it
				return nil, badRequest("%s has a value and type/b64: give a JSON value, or bytes with their type", at)
			}
			if err := validText(at+".type", wr.Type, 1, maxBlobTypeBytes); err != nil {
				return nil, err
			}
			if wr.Data == nil {
				return nil, badRequest("%s.b64 is required with type (the value's bytes)", at)
			}
			a.Entries[i] = fsm.CheckpointWrite{Idx: idx, Channel: wr.Channel, Value: wr.Data, Type: wr.Type}
			continue
		}
		if len(wr.Value) == 0 {
			return nil, badRequest("%s.value is required (any JSON value), or type and b64 (bytes)", at)
		}
		v, err := compactJSON(at+".value", wr.Value)
		if err != nil {
			return nil, err
		}
		a.Entries[i] = fsm.CheckpointWrite{Idx: idx, Channel: wr.Channel, Value: v}
	}
	var err error
	a.Fence, err = fenceArg(req.Fence)
	return a, err
}

func (s *Server) handleThreadDelete(w http.ResponseWriter, r *http.Request, id *identity) error {
	if r.URL.Query().Has(checkpointNSParameter) {
		return badRequest("deleting a thread deletes every namespace of it: %s is not taken here", checkpointNSParameter)
	}
	sc, err := s.threadAccess(id, r, actDelete)
	if err != nil {
		return err
	}
	var req wire.ThreadDelete
	body, err := readBody(w, r, s.cfg.MaxJSONBody, s.cfg.BodyTimeout)
	if err != nil {
		return err
	}
	if len(body) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			return err
		}
	}
	fence, err := fenceArg(req.Fence)
	if err != nil {
		return err
	}
	args := &fsm.ThreadDeleteArgs{Thread: sc.thread, Fence: fence}
	res, err := s.propose(r, id, sc.tenant, fsm.KindThreadDelete, args, body)
	if err != nil {
		return err
	}
	return reply(w, res, nil)
}
