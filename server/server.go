// Package server is Baton's HTTP API (docs/api.md) over a Raft cluster member.
//
// Every request goes through one route table. A route is a write, a read or
// local. On a follower, writes and linearizable reads are forwarded to the
// leader as they came (the leader authenticates, validates and applies);
// stale reads and local routes are answered here. On the leader, a handler
// decodes and authorizes a write, the replica facade (server/core/replica)
// builds its fsm.Command (the leader's clock, the caller, the entry
// version), proposes it and waits, and the handler answers; a linearizable
// read first passes the facade's read barrier. The server knows Raft only
// through the Cluster interface, and the facade.
package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/fsm/wire"
	"github.com/baton-dev/baton/server/core/chunkplane"
	"github.com/baton-dev/baton/server/core/chunkstore"
	"github.com/baton-dev/baton/server/core/node"
	"github.com/baton-dev/baton/server/core/replica"
	"github.com/baton-dev/baton/server/core/tlsconf"
	"github.com/baton-dev/baton/server/mcpserver"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// Cluster is what the HTTP layer needs from the Raft member.
type Cluster interface {
	ID() string
	HTTPAddr() string
	RaftAddr() string
	IsLeader() bool
	Leader() (id, raftAddr string)
	// LastLeaderContact is when this follower last heard from a leader.
	LastLeaderContact() time.Time
	HTTPAddrOf(id string) string
	Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error)
	ReadBarrier(ctx context.Context) error
	WriteBarrier(ctx context.Context) error
	Members() ([]node.MemberInfo, error)
	AddMember(ctx context.Context, id, raftAddr string, voter bool) error
	RemoveMember(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, id string) error
	Term() uint64
	CommitIndex() uint64
	LastSnapshotIndex() uint64
}

// Config configures the HTTP layer.
type Config struct {
	// Build identifies this binary (GET /v1/cluster, baton_build_info).
	Build        Build
	AdminToken   string
	MaxJSONBody  int64 // default 1 MiB
	MaxChunkBody int64 // default 4 MiB
	// MaxCheckpointBytes bounds the data of one checkpoint held in chunks
	// (the server reads it whole to check it is JSON); default 16 MiB.
	MaxCheckpointBytes int64
	// MaxBlobReadBytes bounds the bytes of checkpoint values held in
	// chunks that this node holds in memory at once, read whole into the
	// answers of checkpoint GETs and lists being built (batond
	// --max-blob-read-bytes); one that finds no room now is 503. Default
	// 256 MiB.
	MaxBlobReadBytes int64
	// ChunkCopyBacklog bounds the bytes of chunk bodies held by copies to
	// peers still in flight after an upload was answered (batond
	// --chunk-copy-backlog-bytes); past it such copies are stopped and
	// repair brings the peer the body later. Default 256 MiB.
	ChunkCopyBacklog int64
	IdempotencyTTL   time.Duration // default 24h
	// MaxWatchesPerPrincipal caps the watches one principal holds open on
	// this node (0: no cap); the admin's are not counted.
	MaxWatchesPerPrincipal int
	// Limits are the bounds on retry state this node makes the cluster's
	// when it leads (zero fields: fsm's defaults).
	Limits         fsm.Limits
	RequestTimeout time.Duration // bound on one request's wait for Raft; default 10s
	// BodyTimeout bounds how long the server waits for a request body it
	// reads whole, from when it starts reading; default 1m (batond
	// --http-body-timeout, which also bounds bodies streamed elsewhere).
	BodyTimeout time.Duration
	// Faults, when set (batond --failpoints), enables the internal
	// failpoint endpoint: cut Raft links, skew the clock this node stamps.
	Faults *node.Faults
	// Chunks is this node's chunk body store; without it the chunk and
	// artifact content endpoints answer 503.
	Chunks *chunkstore.Store
	// ChunkGCGrace is how long an unreferenced chunk is kept; default 1h.
	ChunkGCGrace time.Duration
	// CatchUpWait bounds how long a watch waits for this node to apply up
	// to the client's resume point before answering 503; default 2s.
	CatchUpWait time.Duration
	// PeerTLS, when set (batond --peer-*), is how members know each other
	// over HTTP: a node-to-node call presents this node's peer certificate
	// and carries no admin token, and the internal routes accept only a
	// caller whose verified client certificate chains to the peer CA.
	PeerTLS *tlsconf.Peer
	// PeerClientTLS, when set, makes node-to-node calls (forwarding, chunk
	// copies and repair, publishing this node's address) https with this
	// configuration: the peers' API serves TLS.
	PeerClientTLS *tls.Config
	// StoreScanMax bounds the items or namespaces one knowledge-store
	// search or listing examines (batond --store-scan-max); default 10,000.
	StoreScanMax int
	// MCP configures /mcp (mcp.go).
	MCP MCPConfig
	// ConsoleDisabled: do not serve the web console at /ui/ (docs/console.md).
	ConsoleDisabled bool
	Logger          *slog.Logger
}

// Build is a binary's version, commit and Go version.
type Build = wire.Build

func (c *Config) setDefaults() {
	if c.MaxJSONBody == 0 {
		c.MaxJSONBody = 1 << 20
	}
	if c.MaxChunkBody == 0 {
		c.MaxChunkBody = 4 << 20
	}
	if c.MaxCheckpointBytes == 0 {
		c.MaxCheckpointBytes = 16 << 20
	}
	if c.MaxBlobReadBytes == 0 {
		c.MaxBlobReadBytes = 256 << 20
	}
	if c.IdempotencyTTL == 0 {
		c.IdempotencyTTL = 24 * time.Hour
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = defaultBodyTimeout
	}
	if c.ChunkGCGrace == 0 {
		c.ChunkGCGrace = time.Hour
	}
	if c.CatchUpWait == 0 {
		c.CatchUpWait = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Server serves the API for one node.
type Server struct {
	cfg     Config
	cluster Cluster
	fsm     *fsm.FSM
	// replica is the facade every command and barrier goes through.
	replica   *replica.Replica
	log       *slog.Logger
	adminHash [32]byte
	mux       *http.ServeMux
	proxy     *forwarder
	limits    *limiter
	metrics   *metrics
	chunks    *chunkplane.Plane
	// blobReads holds the bytes of checkpoint values read from chunks
	// into answers not yet written (Config.MaxBlobReadBytes).
	blobReads *semaphore.Weighted
	// caughtUp: since it started, this node applied the commit index the
	// leader reported (GET /readyz).
	caughtUp atomic.Bool
	// catchUpTarget: the commit index /readyz waits for before caughtUp,
	// fixed by its first probe (0: not asked yet).
	catchUpTarget atomic.Uint64
	// mcp serves /mcp (mcp.go); nil when disabled.
	mcp *mcpserver.HTTPHandler

	// ctx is the server's lifetime: every background call (the loops and
	// the calls they make) runs under it, and Close cancels it.
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// New builds a server; Start begins its background work.
func New(cfg Config, c Cluster, f *fsm.FSM) *Server {
	cfg.setDefaults()
	s := &Server{cfg: cfg, cluster: c, fsm: f, log: cfg.Logger,
		adminHash: sha256.Sum256([]byte(cfg.AdminToken)), mux: http.NewServeMux()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.replica = replica.New(replica.Config{Node: c, FSM: f, ClockOffset: cfg.Faults.ClockOffset, IdempotencyTTL: cfg.IdempotencyTTL})
	s.proxy = newForwarder(s.ctx, c, f, s.log, s.cfg.RequestTimeout)
	if cfg.PeerClientTLS != nil {
		s.proxy.useTLS(cfg.PeerClientTLS)
	}
	s.proxy.peerOf = s.peerOf
	s.proxy.bodyTimeout = s.cfg.BodyTimeout
	s.metrics = newMetrics(c, f)
	s.metrics.buildInfo(s.cfg.Build)
	s.limits = newLimiter(s.cfg.MaxWatchesPerPrincipal)
	s.blobReads = semaphore.NewWeighted(s.cfg.MaxBlobReadBytes)
	s.chunks = chunkplane.New(chunkplane.Config{Store: cfg.Chunks, Cluster: c, FSM: f, Peers: chunkPeers{s},
		Now: s.now, GCGrace: cfg.ChunkGCGrace, RequestTimeout: cfg.RequestTimeout, MaxChunkBody: cfg.MaxChunkBody,
		MaxCopyBacklog: cfg.ChunkCopyBacklog, Logger: s.log})
	s.registerNodeMetrics()
	s.routes()
	return s
}

// Start launches background work: registering this node's HTTP address in
// the replicated membership, (on the leader) purging expired KV entries,
// asking the peers whether this node was removed (while it knows no
// leader), and the chunk plane (copies, repair, chunk GC).
func (s *Server) Start() {
	s.wg.Go(s.registerLoop)
	s.wg.Go(s.purgeLoop)
	s.wg.Go(s.removalLoop)
	s.chunks.Start()
}

// Close stops background work: it cancels the server's context, which
// every background call runs under, and waits for them all. Idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		if s.mcp != nil {
			s.mcp.Close()
		}
		s.wg.Wait()
		s.chunks.Close()
		s.proxy.close()
	})
}

// Handler is the HTTP handler of the API. A path that is not in clean form
// ("//", "." or ".." segments) is refused here: ServeMux would otherwise
// answer with a redirect that keeps the method and body, sending a write
// meant for kv/ns/a/../b to kv/ns/b. The form is the escaped path's, as
// ServeMux sees it: a percent-encoded "/" or "." is part of its segment (a
// thread id such as "a/../b" or ".."), and handlers validate segments.
func (s *Server) Handler() http.Handler {
	return s.metrics.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.EscapedPath(); !cleanPath(p) {
			writeError(w, badRequest("path %q has an empty, \".\" or \"..\" segment", p))
			return
		}
		s.mux.ServeHTTP(w, r)
	}))
}

// cleanPath reports whether p is in the form ServeMux serves without a
// redirect: rooted, no empty, "." or ".." segment, at most one trailing
// slash ("//" is not "/").
func cleanPath(p string) bool {
	c := path.Clean(p)
	if c != "/" && strings.HasSuffix(p, "/") {
		c += "/"
	}
	return c == p
}

// Registry exposes the server's Prometheus registry (for tests).
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// now is the leader's clock as stamped into commands, in Unix ms.
func (s *Server) now() int64 { return s.replica.Now() }

func (s *Server) isAdminToken(tok string) bool {
	h := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(h[:], s.adminHash[:]) == 1
}

func hashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}
