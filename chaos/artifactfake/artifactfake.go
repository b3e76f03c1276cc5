// Package artifactfake is an in-memory stand-in for the chunk, artifact
// and ref routes of a Baton node, for tenant "acme" only, with the
// behaviour of server/chunks.go, server/artifacts.go, server/artifactlife.go
// and server/refs.go that the SDK (client/) and the CLI (cmd/baton) rely
// on. Their tests use it where a real batond cannot do what they need:
// hold uploads at a gate, count what was sent, serve corrupt or truncated
// content. It is for tests only; nothing in a binary imports it.
package artifactfake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/fsm/wire"
)

// Tenant is the one tenant the node serves.
const Tenant = "acme"

// Request is one request the node received. Chunk bodies are recorded as
// "<N bytes>".
type Request struct {
	Route string // "METHOD /path"
	Query string
	Auth  string // the Authorization header
	Body  string
}

// Node is the fake node; the zero value is not ready, use New.
type Node struct {
	// PutGate, when set before the first request, makes each chunk PUT
	// wait for a value from it (or the request's end).
	PutGate chan struct{}

	mu       sync.Mutex
	chunks   map[string][]byte
	versions map[string][]client.Manifest
	refs     map[string]client.Ref
	policies map[string]client.ArtifactPolicy
	reqs     []Request
	puts     []string // chunk digests in PUT order
	keys     []string // Idempotency-Key of each chunk PUT and publish
	missing  int      // /chunks/missing calls
	corrupt  bool     // serve content with one byte of its middle chunk flipped
	truncate bool     // cut content short in its middle chunk

	inFlight, maxInFlight atomic.Int64
}

// New returns an empty node.
func New() *Node {
	return &Node{chunks: map[string][]byte{}, versions: map[string][]client.Manifest{},
		refs: map[string]client.Ref{}, policies: map[string]client.ArtifactPolicy{}}
}

// Requests is every request received so far, in order.
func (n *Node) Requests() []Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Request(nil), n.reqs...)
}

// Puts is the digest of every chunk PUT so far, in order.
func (n *Node) Puts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.puts...)
}

// Keys is the Idempotency-Key of every chunk PUT and publish, in order.
func (n *Node) Keys() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.keys...)
}

// MissingCalls is how many /chunks/missing requests came.
func (n *Node) MissingCalls() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.missing
}

// InFlight is how many chunk PUTs are in progress now.
func (n *Node) InFlight() int64 { return n.inFlight.Load() }

// MaxInFlight is the most chunk PUTs that were in progress at once.
func (n *Node) MaxInFlight() int64 { return n.maxInFlight.Load() }

// SetFaults makes content downloads corrupt (one byte flipped) or
// truncated (cut in the middle, the connection aborted).
func (n *Node) SetFaults(corrupt, truncate bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.corrupt, n.truncate = corrupt, truncate
}

// Versions is a name's versions, oldest first.
func (n *Node) Versions(name string) []client.Manifest {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]client.Manifest(nil), n.versions[name]...)
}

// PutRef sets a ref directly.
func (n *Node) PutRef(r client.Ref) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.refs[r.Ref] = r
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Baton-Index", "9")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func replyError(w http.ResponseWriter, status int, code, msg string, details map[string]any) {
	obj := map[string]any{"code": code, "message": msg}
	for k, v := range details {
		obj[k] = v
	}
	reply(w, status, map[string]any{"error": obj})
}

// ServeHTTP serves the routes of docs/api.md "Chunks and artifacts" and
// "Refs" for tenant acme.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, "/v1/tenants/"+Tenant+"/")
	if ok && r.Method == "PUT" && strings.HasPrefix(path, "chunks/") {
		n.putChunk(w, r, strings.TrimPrefix(path, "chunks/"))
		return
	}
	body, _ := io.ReadAll(r.Body)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.record(r, string(body))
	switch {
	case !ok:
		replyError(w, 404, "not_found", "no such endpoint", nil)
	case r.Method == "POST" && path == "chunks/missing":
		n.missingChunks(w, body)
	case r.Method == "GET" && path == "artifacts":
		n.list(w, r)
	case path == "artifact-policies":
		n.policy(w, r, body)
	case r.Method == "POST" && strings.HasPrefix(path, "artifacts/") && strings.HasSuffix(path, "/versions"):
		n.publish(w, r, strings.TrimSuffix(strings.TrimPrefix(path, "artifacts/"), "/versions"), body)
	case r.Method == "GET" && strings.HasPrefix(path, "artifacts/by-id/"):
		n.byID(w, strings.TrimPrefix(path, "artifacts/by-id/"))
	case r.Method == "GET" && strings.HasPrefix(path, "artifacts/"):
		n.get(w, strings.Split(strings.TrimPrefix(path, "artifacts/"), "/"))
	case r.Method == "DELETE" && strings.HasPrefix(path, "artifacts/"):
		n.delete(w, r, strings.Split(strings.TrimPrefix(path, "artifacts/"), "/"))
	case strings.HasPrefix(path, "refs"):
		n.ref(w, r, strings.TrimPrefix(strings.TrimPrefix(path, "refs"), "/"), body)
	default:
		replyError(w, 404, "not_found", "no such endpoint", nil)
	}
}

func (n *Node) record(r *http.Request, body string) {
	n.reqs = append(n.reqs, Request{r.Method + " " + r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), body})
}

func (n *Node) missingChunks(w http.ResponseWriter, body []byte) {
	var in wire.ChunksMissing
	if err := json.Unmarshal(body, &in); err != nil {
		replyError(w, 400, "invalid_argument", err.Error(), nil)
		return
	}
	n.missing++
	missing := []string{}
	for _, d := range in.Digests {
		if _, ok := n.chunks[d]; !ok {
			missing = append(missing, d)
		}
	}
	reply(w, 200, wire.MissingChunks{Missing: missing})
}

func (n *Node) putChunk(w http.ResponseWriter, r *http.Request, digest string) {
	in := n.inFlight.Add(1)
	defer n.inFlight.Add(-1)
	for {
		m := n.maxInFlight.Load()
		if in <= m || n.maxInFlight.CompareAndSwap(m, in) {
			break
		}
	}
	if n.PutGate != nil {
		select {
		case <-n.PutGate:
		case <-r.Context().Done():
			return
		}
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, client.ChunkMaxSize+1))
	n.mu.Lock()
	defer n.mu.Unlock()
	n.record(r, "<"+strconv.Itoa(len(body))+" bytes>")
	if len(body) > client.ChunkMaxSize {
		replyError(w, 413, "too_large", "chunk over 4 MiB", nil)
		return
	}
	if client.Digest(body) != digest {
		replyError(w, 400, "digest_mismatch", "body does not hash to "+digest, nil)
		return
	}
	n.puts = append(n.puts, digest)
	n.keys = append(n.keys, r.Header.Get("Idempotency-Key"))
	status := 200
	if _, ok := n.chunks[digest]; !ok {
		n.chunks[digest] = body
		status = 201
	}
	reply(w, status, map[string]any{"digest": digest, "size": len(body)})
}

func (n *Node) publish(w http.ResponseWriter, r *http.Request, name string, body []byte) {
	var req client.PublishRequest
	if err := json.Unmarshal(body, &req); err != nil {
		replyError(w, 400, "invalid_argument", err.Error(), nil)
		return
	}
	n.keys = append(n.keys, r.Header.Get("Idempotency-Key"))
	h := sha256.New()
	var total int64
	for _, c := range req.Chunks {
		b, ok := n.chunks[c.Digest]
		if !ok {
			replyError(w, 400, "missing_chunks", "missing", map[string]any{"missing": []string{c.Digest}})
			return
		}
		h.Write(b)
		total += c.Size
	}
	if total != req.Size || "sha256:"+hex.EncodeToString(h.Sum(nil)) != req.Digest {
		replyError(w, 400, "digest_mismatch", "content does not hash to its digest", nil)
		return
	}
	id, _ := json.Marshal(struct {
		N string
		R client.PublishRequest
	}{name, req})
	m := client.Manifest{ArtifactID: client.Digest(id), Name: name, Digest: req.Digest, Size: req.Size,
		Chunks: req.Chunks, MediaType: req.MediaType, Sources: req.Sources, TaskID: req.TaskID,
		CreatedBy: "admin", CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	if req.Fence != nil {
		m.FencingToken = req.Fence.Token
	}
	vs := n.versions[name]
	if len(vs) > 0 && vs[len(vs)-1].ArtifactID == m.ArtifactID {
		reply(w, 200, vs[len(vs)-1])
		return
	}
	m.Version = 1
	if len(vs) > 0 {
		m.Version = vs[len(vs)-1].Version + 1
	}
	n.versions[name] = append(vs, m)
	reply(w, 201, m)
}

func (n *Node) byID(w http.ResponseWriter, id string) {
	for _, vs := range n.versions {
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i].ArtifactID == id {
				reply(w, 200, vs[i])
				return
			}
		}
	}
	replyError(w, 404, "not_found", "artifact "+id+" not found", nil)
}

// version finds a name's version by number.
func (n *Node) version(name, v string) (int, bool) {
	num, _ := strconv.ParseUint(v, 10, 64)
	for i, m := range n.versions[name] {
		if m.Version == num {
			return i, true
		}
	}
	return 0, false
}

func (n *Node) get(w http.ResponseWriter, parts []string) {
	vs := n.versions[parts[0]]
	if len(parts) == 2 {
		reply(w, 200, map[string]any{"versions": append([]client.Manifest{}, vs...)})
		return
	}
	i, ok := n.version(parts[0], parts[2])
	if !ok {
		replyError(w, 404, "not_found", "no such version", nil)
		return
	}
	m := vs[i]
	if len(parts) == 3 {
		reply(w, 200, m)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(m.Size, 10))
	w.Header().Set("ETag", `"`+m.Digest+`"`)
	w.WriteHeader(200)
	for i, c := range m.Chunks {
		b := n.chunks[c.Digest]
		if n.corrupt && i == len(m.Chunks)/2 {
			b = append([]byte(nil), b...)
			b[len(b)/2] ^= 1
		}
		if n.truncate && i == len(m.Chunks)/2 {
			w.Write(b[:len(b)/2])
			panic(http.ErrAbortHandler)
		}
		w.Write(b)
	}
}

// list serves GET .../artifacts: names under prefix, page_token the last
// name of the previous page (unencoded: the client treats it as opaque).
func (n *Node) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 {
		limit = l
	}
	var names []string
	for name, vs := range n.versions {
		if len(vs) > 0 && strings.HasPrefix(name, q.Get("prefix")) && name > q.Get("page_token") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := []client.ArtifactSummary{}
	next := ""
	for _, name := range names {
		if len(out) == limit {
			next = out[len(out)-1].Name
			break
		}
		vs := n.versions[name]
		out = append(out, client.ArtifactSummary{Name: name, LatestVersion: vs[len(vs)-1].Version, Versions: len(vs)})
	}
	reply(w, 200, map[string]any{"artifacts": out, "next_page_token": next})
}

// delete serves DELETE .../artifacts/{name}[/versions/{n}], refused with
// referenced while a ref points at a version going.
func (n *Node) delete(w http.ResponseWriter, r *http.Request, parts []string) {
	name, vs := parts[0], n.versions[parts[0]]
	gone := vs
	if len(parts) == 3 {
		i, ok := n.version(name, parts[2])
		if !ok {
			replyError(w, 404, "not_found", "artifact "+name+" version "+parts[2]+" not found", nil)
			return
		}
		gone = vs[i : i+1]
	} else if len(vs) == 0 {
		replyError(w, 404, "not_found", "artifact "+name+" not found", nil)
		return
	}
	var refs []string
	for _, g := range gone {
		for _, ref := range n.refs {
			if ref.ArtifactID == g.ArtifactID {
				refs = append(refs, ref.Ref)
			}
		}
	}
	if len(refs) > 0 {
		sort.Strings(refs)
		replyError(w, 409, "referenced", "artifact "+name+" is referenced by "+strings.Join(refs, ", "), map[string]any{"refs": refs})
		return
	}
	if len(parts) == 3 {
		i, _ := n.version(name, parts[2])
		n.versions[name] = append(vs[:i:i], vs[i+1:]...)
	} else {
		delete(n.versions, name)
	}
	w.WriteHeader(204)
}

func (n *Node) policy(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Method == "GET" {
		out := []client.ArtifactPolicy{}
		for _, p := range n.policies {
			out = append(out, p)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Prefix < out[j].Prefix })
		reply(w, 200, map[string]any{"policies": out})
		return
	}
	var p client.ArtifactPolicy
	if err := json.Unmarshal(body, &p); err != nil {
		replyError(w, 400, "invalid_argument", err.Error(), nil)
		return
	}
	if p.KeepLast == 0 {
		delete(n.policies, p.Prefix)
	} else {
		n.policies[p.Prefix] = p
	}
	reply(w, 200, p)
}

func (n *Node) ref(w http.ResponseWriter, r *http.Request, ref string, body []byte) {
	switch r.Method {
	case "GET":
		if ref == "" {
			list := []client.Ref{}
			for _, v := range n.refs {
				list = append(list, v)
			}
			sort.Slice(list, func(i, j int) bool { return list[i].Ref < list[j].Ref })
			reply(w, 200, map[string]any{"refs": list})
			return
		}
		v, ok := n.refs[ref]
		if !ok {
			replyError(w, 404, "not_found", "ref "+ref+" not found", nil)
			return
		}
		reply(w, 200, v)
	case "PUT":
		var req wire.RefSet
		_ = json.Unmarshal(body, &req)
		cur, ok := n.refs[ref]
		if ok && cur.ArtifactID == req.ArtifactID {
			reply(w, 200, cur)
			return
		}
		if req.ExpectArtifactID != nil && *req.ExpectArtifactID != cur.ArtifactID {
			replyError(w, 409, "version_mismatch", "ref points elsewhere", map[string]any{"artifact_id": cur.ArtifactID})
			return
		}
		v := client.Ref{Ref: ref, ArtifactID: req.ArtifactID, Name: "report", Version: 1, Revision: cur.Revision + 1}
		n.refs[ref] = v
		reply(w, 200, v)
	case "DELETE":
		if q := r.URL.Query(); q.Has("expect_artifact_id") && q.Get("expect_artifact_id") != n.refs[ref].ArtifactID {
			replyError(w, 409, "version_mismatch", "ref points elsewhere", map[string]any{"artifact_id": n.refs[ref].ArtifactID})
			return
		}
		delete(n.refs, ref)
		w.WriteHeader(204)
	}
}
