package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
)

// artifactRoutes: one pattern serves by-id and the name's versions, since
// "by-id/{id}" and "{name}/versions" would otherwise both match
// ".../by-id/versions" and ServeMux refuses ambiguous patterns.
func (s *Server) artifactRoutes(add addRoute) {
	add("GET", "/v1/tenants/{tenant}/artifacts/{path...}", routeRead, s.handleArtifactGet)
	// Publishing re-reads and hashes every chunk before it proposes: a long
	// request for a large artifact.
	add("POST", "/v1/tenants/{tenant}/artifacts/{path...}", routeLongWrite, s.handleArtifactPublish, cmd(wire.ArtifactPublish{}, fsm.KindArtifactPublish))
	s.artifactLifeRoutes(add) // list, delete, keep-last policies (artifactlife.go)
}

// artifactPath splits {name}/versions[/{n}[/content]] or by-id/{id}.
type artifactPath struct {
	byID    string
	name    string
	version uint64 // 0: none given
	content bool
}

func parseArtifactPath(p string) (*artifactPath, error) {
	parts := strings.Split(p, "/")
	if len(parts) == 2 && parts[0] == "by-id" {
		if err := validDigest("artifact_id", parts[1]); err != nil {
			return nil, err
		}
		return &artifactPath{byID: parts[1]}, nil
	}
	if len(parts) < 2 || len(parts) > 4 || parts[1] != "versions" || (len(parts) == 4 && parts[3] != "content") {
		if i := versionsSegment(parts); i > 1 {
			// A versions route whose name holds "/": a bad name, not
			// an unknown endpoint.
			return nil, badRequest("artifact name %q contains \"/\": artifact names match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}",
				strings.Join(parts[:i], "/"))
		}
		return nil, errorf(fsm.CodeNotFound, "no such endpoint: artifacts/%s", p)
	}
	ap := &artifactPath{name: parts[0], content: len(parts) == 4}
	if err := validName("artifact name", ap.name); err != nil {
		return nil, err
	}
	if len(parts) >= 3 {
		n, err := strconv.ParseUint(parts[2], 10, 64)
		if err != nil || n == 0 {
			return nil, badRequest("version %q must be a positive integer", parts[2])
		}
		ap.version = n
	}
	return ap, nil
}

// versionsSegment returns the index of the "versions" segment that ends
// the name in a path of a versions route ({name}/versions,
// {name}/versions/{n}, {name}/versions/{n}/content), or -1.
func versionsSegment(parts []string) int {
	n := len(parts)
	switch {
	case n >= 4 && parts[n-3] == "versions" && parts[n-1] == "content":
		return n - 3
	case n >= 3 && parts[n-2] == "versions":
		return n - 2
	case n >= 2 && parts[n-1] == "versions":
		return n - 1
	}
	return -1
}

func (s *Server) handleArtifactPublish(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	ap, err := parseArtifactPath(r.PathValue("path"))
	if err != nil {
		return err
	}
	if ap.byID != "" || ap.version != 0 {
		return errorf(codeMethodNotAllowed, "POST is only allowed on artifacts/{name}/versions")
	}
	if err := s.tenantAccess(id, tenant, resArtifacts, ap.name, actWrite); err != nil {
		return err
	}
	var req wire.ArtifactPublish
	body, err := s.readJSON(w, r, &req)
	if err != nil {
		return err
	}
	args, err := artifactPublishArgs(&req, ap.name)
	if err != nil {
		return err
	}
	if missing, _ := s.fsm.ChunksHeld(tenant, chunkDigests(args.Chunks)); len(missing) > 0 {
		return &apiError{Code: fsm.CodeMissingChunks, Message: strconv.Itoa(len(missing)) + " chunks are not held by this tenant",
			Details: map[string]any{"missing": missing}}
	}
	if err := s.mayReadChunks(id, tenant, args.Chunks); err != nil {
		return err
	}
	if !s.sameContentAsLatest(tenant, args) {
		if err := s.verifyContent(r.Context(), args); err != nil {
			return err
		}
	}
	return s.proposeAndReply(w, r, id, tenant, fsm.KindArtifactPublish, args, body)
}

// mayReadChunks checks that a publisher could read every chunk its
// manifest names, since it could read them through the new artifact: it
// may read every artifact (artifacts read, empty prefix), or the chunk is
// in no artifact yet (an upload on its way to its first publication), or
// it is in a version of an artifact the caller may read. Otherwise a
// narrow grant could read any chunk of the tenant by naming its digest.
func (s *Server) mayReadChunks(id *identity, tenant string, chunks []fsm.ChunkRef) error {
	if id.allow(tenant, resArtifacts, "", actRead) == nil {
		return nil
	}
	need := map[string]bool{}
	for _, c := range chunks {
		if s.fsm.ChunkReferenced(tenant, c.Digest) {
			need[c.Digest] = true
		}
	}
	if len(need) == 0 {
		return nil
	}
	visible := func(name string) bool { return id.allow(tenant, resArtifacts, name, actRead) == nil }
	for _, g := range id.grants {
		if (g.Resource != resArtifacts && g.Resource != resAll) || !hasAction(g, actRead) {
			continue
		}
		for d := range s.fsm.ChunksInArtifacts(tenant, strings.TrimSuffix(g.Prefix, "/"), need, visible) {
			delete(need, d)
		}
		if len(need) == 0 {
			return nil
		}
	}
	for _, c := range chunks {
		if need[c.Digest] {
			return errorf(fsm.CodeForbidden, "principal %q may not read chunk %s: a manifest may name only chunks of artifacts the caller may read, or chunks no artifact names yet", id.principal, c.Digest)
		}
	}
	return nil
}

func chunkDigests(chunks []fsm.ChunkRef) []string {
	out := make([]string, len(chunks))
	for i, c := range chunks {
		out[i] = c.Digest
	}
	return out
}

func artifactPublishArgs(req *wire.ArtifactPublish, name string) (*fsm.ArtifactPublishArgs, error) {
	if err := validDigest("digest", req.Digest); err != nil {
		return nil, err
	}
	if req.Size == nil || *req.Size < 0 {
		return nil, badRequest("size is required and must not be negative")
	}
	var total int64
	for i, c := range req.Chunks {
		if err := validDigest("chunks["+strconv.Itoa(i)+"].digest", c.Digest); err != nil {
			return nil, err
		}
		if c.Size < 0 || c.Size > 4<<20 {
			return nil, badRequest("chunks[%d].size must be 0 to 4 MiB", i)
		}
		total += c.Size
	}
	if total != *req.Size {
		return nil, badRequest("chunk sizes add up to %d, not size %d", total, *req.Size)
	}
	if len(req.MediaType) > 255 || len(req.Sources) > 1000 {
		return nil, badRequest("media_type over 255 characters or more than 1000 sources")
	}
	metadata, err := canonicalJSON("metadata", req.Metadata)
	if err != nil {
		return nil, err
	}
	if req.TaskID != "" {
		if err := validName("task_id", req.TaskID); err != nil {
			return nil, err
		}
	}
	fence, err := fenceArg(req.Fence)
	if err != nil {
		return nil, err
	}
	return &fsm.ArtifactPublishArgs{Name: name, Digest: req.Digest, Size: *req.Size, Chunks: req.Chunks,
		MediaType: req.MediaType, Sources: req.Sources, Metadata: metadata, TaskID: req.TaskID, Fence: fence}, nil
}

// canonicalJSON re-encodes an object with sorted keys (numbers kept exact),
// so that equal metadata gives an equal artifact_id.
func canonicalJSON(what string, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badRequest("%s is not valid JSON: %v", what, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, badRequest("%s must be a JSON object", what)
	}
	return json.Marshal(v)
}

// sameContentAsLatest reports whether the name's latest version has the
// content a publish names: the same digest, size and chunks in order. That
// content was verified when the version was published, and chunks never
// change under their digests, so a re-upload of unchanged content is not
// read and hashed again.
func (s *Server) sameContentAsLatest(tenant string, a *fsm.ArtifactPublishArgs) bool {
	m, _, ok := s.fsm.ArtifactVersion(tenant, a.Name, 0)
	if !ok || m.Digest != a.Digest || m.Size != a.Size || len(m.Chunks) != len(a.Chunks) {
		return false
	}
	for i, c := range m.Chunks {
		if c != a.Chunks[i] {
			return false
		}
	}
	return true
}

// readAheadChunks is how many chunks a download or a publish's check
// reads (from disk, decoded, and verified but for a publish's first
// pass) ahead of the one it uses.
const readAheadChunks = 4

// chunksAhead reads the chunks in order, each on a goroutine of its own
// and up to readAheadChunks ahead of the caller, so that reading,
// decoding and verifying the next ones overlap with the caller's use of
// the current one. next returns the chunks one by one; stop ends the
// reads left and waits for them. At most readAheadChunks+1 bodies are in
// memory at once.
func (s *Server) chunksAhead(ctx context.Context, chunks []fsm.ChunkRef) (next func() ([]byte, error), stop func()) {
	return s.chunksAheadWith(ctx, chunks, s.readChunk)
}

// chunksAheadWith is chunksAhead reading each chunk with readOne.
func (s *Server) chunksAheadWith(ctx context.Context, chunks []fsm.ChunkRef, readOne func(context.Context, string) ([]byte, error)) (next func() ([]byte, error), stop func()) {
	type read struct {
		body []byte
		err  error
	}
	ctx, cancel := context.WithCancel(ctx)
	slots := make(chan chan read, readAheadChunks)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(slots)
		for _, c := range chunks {
			out := make(chan read, 1)
			select {
			case slots <- out:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				body, err := readOne(ctx, c.Digest)
				out <- read{body, err}
			})
		}
	})
	next = func() ([]byte, error) {
		out, ok := <-slots
		if !ok {
			return nil, ctx.Err()
		}
		r := <-out
		return r.body, r.err
	}
	return next, func() { cancel(); wg.Wait() }
}

// verifyContent checks that the chunks' bytes, in order, hash to digest.
// It hashes each byte once: the chunks are read without their own digest
// check, since bytes that hash to the manifest's digest are the bytes the
// client hashed. Only when they do not, or a body is not the size the
// manifest gives its chunk, does it read them again verified, which
// finds a corrupt copy and fetches the chunk from a peer, and hash
// those. A verified body of another size than the manifest's ends it
// (400): the bytes read are at most the sizes' sum and the few chunks
// read ahead, however many times the manifest names a large chunk with a
// small size.
func (s *Server) verifyContent(ctx context.Context, a *fsm.ArtifactPublishArgs) error {
	var wrong *sizeMismatch
	got, err := s.contentDigest(ctx, a.Chunks, s.readChunkUnverified)
	switch {
	case errors.As(err, &wrong): // a damaged copy, or a wrong size: the verified pass judges
	case err != nil:
		return err // the chunk plane fetched what it lacked from the peers already
	case got == a.Digest:
		return nil
	}
	got, err = s.contentDigest(ctx, a.Chunks, s.readChunk)
	if errors.As(err, &wrong) {
		return badRequest("%s", wrong)
	}
	if err != nil {
		return err
	}
	if got != a.Digest {
		return errorf(codeDigestMismatch, "the chunks' content hashes to %s, not %s", got, a.Digest)
	}
	return nil
}

// sizeMismatch is a chunk's body of another size than the manifest's.
type sizeMismatch struct {
	index      int
	size, held int64
}

func (e *sizeMismatch) Error() string {
	return fmt.Sprintf("chunks[%d] has size %d, the chunk holds %d bytes", e.index, e.size, e.held)
}

// contentDigest is the digest of the chunks' bytes in order, each read
// with read; a body not the size the manifest gives its chunk ends it
// with a *sizeMismatch.
func (s *Server) contentDigest(ctx context.Context, chunks []fsm.ChunkRef, read func(context.Context, string) ([]byte, error)) (string, error) {
	h := sha256.New()
	next, stop := s.chunksAheadWith(ctx, chunks, read)
	defer stop()
	for i, c := range chunks {
		body, err := next()
		if err != nil {
			return "", err
		}
		if int64(len(body)) != c.Size {
			return "", &sizeMismatch{index: i, size: c.Size, held: int64(len(body))}
		}
		h.Write(body)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func (s *Server) handleArtifactGet(w http.ResponseWriter, r *http.Request, id *identity) error {
	tenant := r.PathValue("tenant")
	ap, err := parseArtifactPath(r.PathValue("path"))
	if err != nil {
		return err
	}
	if ap.byID != "" {
		return s.artifactByID(w, id, tenant, ap.byID)
	}
	if err := s.tenantAccess(id, tenant, resArtifacts, ap.name, actRead); err != nil {
		return err
	}
	if ap.version == 0 {
		list, index := s.fsm.ArtifactVersions(tenant, ap.name)
		return s.readReply(w, index, map[string]any{"versions": list})
	}
	m, index, ok := s.fsm.ArtifactVersion(tenant, ap.name, ap.version)
	if !ok {
		return errorf(fsm.CodeNotFound, "artifact %s version %d not found", ap.name, ap.version)
	}
	if !ap.content {
		return s.readReply(w, index, m)
	}
	return s.streamContent(w, r, m, index)
}

func (s *Server) artifactByID(w http.ResponseWriter, id *identity, tenant, aid string) error {
	if err := s.inTenant(id, tenant); err != nil {
		return err
	}
	m, index, ok := s.fsm.ArtifactByID(tenant, aid)
	if ok && id.allow(tenant, resArtifacts, m.Name, actRead) == nil {
		return s.readReply(w, index, m)
	}
	if !ok && id.allow(tenant, resArtifacts, "", actRead) == nil {
		return errorf(fsm.CodeNotFound, "artifact %s not found", aid)
	}
	return errorf(fsm.CodeForbidden, "principal %q may not read artifact %s", id.principal, aid)
}

// streamContent writes the artifact's bytes chunk by chunk: one chunk in
// memory at a time, whatever the artifact's size.
func (s *Server) streamContent(w http.ResponseWriter, r *http.Request, m *fsm.Manifest, index uint64) error {
	var first []byte
	if len(m.Chunks) > 0 { // fail with a clean error before the headers go out
		var err error
		if first, err = s.readChunk(r.Context(), m.Chunks[0].Digest); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if m.MediaType != "" {
		w.Header().Set("Content-Type", m.MediaType)
	}
	w.Header().Set("Content-Length", strconv.FormatInt(m.Size, 10))
	w.Header().Set("ETag", `"`+m.Digest+`"`)
	setIndex(w, index)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead || len(m.Chunks) == 0 {
		return nil
	}
	if _, err := w.Write(first); err != nil {
		return nil
	}
	rest := m.Chunks[1:]
	next, stop := s.chunksAhead(r.Context(), rest)
	defer stop()
	for _, c := range rest {
		body, err := next()
		if err != nil {
			s.log.Warn("artifact download cut short", "artifact", m.ArtifactID, "chunk", c.Digest, "err", err)
			panic(http.ErrAbortHandler) // the client sees a truncated body, never wrong bytes
		}
		if _, err := w.Write(body); err != nil {
			return nil
		}
	}
	return nil
}
