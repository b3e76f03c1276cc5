// Package chunkplane moves chunk bodies between the members of a cluster,
// beside the Raft log (docs/design.md "Chunks beside the log"): it copies a
// new body to the peers until a majority of voters holds it, fetches a body
// this node lacks from a peer, repairs the bodies the replicated index says
// this node should hold, sweeps bodies no tenant holds any more, and, on
// the leader, proposes chunk GC once an unreferenced chunk has outlived the
// grace period.
//
// It sits below the HTTP API (package server), which owns the routes and
// their errors; it reaches peers through the internal chunk routes with the
// Peers the API gives it, and the replicated state through *fsm.FSM.
//
// # Lifetime
//
// New builds a Plane; Start launches its loops (repair and sweep every 2 s,
// chunk GC on the leader every 250 ms); Close cancels the Plane's context,
// which every background call (loop work and the copies to peers that
// Replicate leaves in flight) runs under, and waits for all of them. After
// Close, Replicate fails with an *Unavailable error.
package chunkplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/chunkstore"
	"github.com/baton-dev/baton/server/core/node"
)

// Cluster is what the plane needs from the Raft member.
type Cluster interface {
	ID() string
	IsLeader() bool
	Members() ([]node.MemberInfo, error)
	Apply(ctx context.Context, cmd *fsm.Command) (*fsm.Result, error)
}

// Peers makes this member's calls to a peer's HTTP API.
type Peers interface {
	// URL is the URL of path on the peer serving HTTP at addr.
	URL(addr, path string) string
	// Do sends req, authenticated as this member.
	Do(req *http.Request) (*http.Response, error)
}

// Config configures a Plane.
type Config struct {
	Store   *chunkstore.Store // nil: no bodies here; Read and Fetch fail, repair idles
	Cluster Cluster
	FSM     *fsm.FSM
	Peers   Peers
	// Now is the leader's clock as stamped into commands, in Unix ms.
	Now            func() int64
	GCGrace        time.Duration // how long an unreferenced chunk is kept
	RequestTimeout time.Duration // bound on one chunk GC proposal
	MaxChunkBody   int64         // the largest body read from a peer
	// MaxCopyBacklog bounds the bytes of bodies held by copies that
	// Replicate left in flight when it returned (to a slow or paused
	// peer): a copy that would go past it is stopped at once, and repair
	// brings that peer the body later. 0: DefaultMaxCopyBacklog.
	MaxCopyBacklog int64
	Logger         *slog.Logger
}

// DefaultMaxCopyBacklog is Config.MaxCopyBacklog's default
// (--chunk-copy-backlog-bytes).
const DefaultMaxCopyBacklog int64 = 256 << 20

// copyTimeout bounds one copy of a body to a peer.
const copyTimeout = 30 * time.Second

// Unavailable is a failure the caller may retry: no majority reachable, no
// peer with the body, no chunk store, or the plane closed.
type Unavailable struct{ Msg string }

func (e *Unavailable) Error() string { return e.Msg }

func unavailablef(format string, args ...any) error {
	return &Unavailable{Msg: fmt.Sprintf(format, args...)}
}

// Plane is one member's chunk plane.
type Plane struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex // guards closed and wg.Add against Close's Wait
	closed bool
	wg     sync.WaitGroup

	backlog atomic.Int64 // RepairBacklog

	lingering atomic.Int64 // bytes held by copies Replicate left in flight (CopyBacklog)
	stopped   atomic.Int64 // copies stopped over MaxCopyBacklog (CopiesStopped)
}

// New builds a plane; nothing runs until Start.
func New(cfg Config) *Plane {
	if cfg.MaxCopyBacklog <= 0 {
		cfg.MaxCopyBacklog = DefaultMaxCopyBacklog
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Plane{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel}
}

// Start launches the repair, sweep and chunk GC loops.
func (p *Plane) Start() {
	p.spawn(p.repairLoop)
	p.spawn(p.collectLoop)
}

// Close cancels every background call and waits for them. Idempotent.
func (p *Plane) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

// spawn runs f on its own goroutine under the plane's lifetime; it reports
// false, running nothing, once the plane is closed.
func (p *Plane) spawn(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Go(f)
	return true
}

// Read returns a verified body: from this node's store, or fetched from a
// peer (and stored) when the local copy is missing or corrupt.
func (p *Plane) Read(ctx context.Context, digest string) ([]byte, error) {
	if p.cfg.Store == nil {
		return nil, unavailablef("this node has no chunk store")
	}
	body, err := p.cfg.Store.Get(digest)
	if err == nil {
		return body, nil
	}
	if !errors.Is(err, chunkstore.ErrNotFound) && !errors.Is(err, chunkstore.ErrCorrupt) {
		return nil, err
	}
	return p.Fetch(ctx, digest)
}

// ReadUnverified is Read without the digest check of a local copy
// (chunkstore.GetUnverified), for a caller that hashes the bodies itself
// and calls Read when that hash is wrong. A body fetched from a peer is
// verified all the same.
func (p *Plane) ReadUnverified(ctx context.Context, digest string) ([]byte, error) {
	if p.cfg.Store == nil {
		return nil, unavailablef("this node has no chunk store")
	}
	body, err := p.cfg.Store.GetUnverified(digest)
	if err == nil {
		return body, nil
	}
	if !errors.Is(err, chunkstore.ErrNotFound) && !errors.Is(err, chunkstore.ErrCorrupt) {
		return nil, err
	}
	return p.Fetch(ctx, digest)
}

// peers are the other members with a published HTTP address.
func (p *Plane) peers() (peers []node.MemberInfo, voters int, selfVoter bool) {
	members, err := p.cfg.Cluster.Members()
	if err != nil {
		return nil, 0, false
	}
	for _, m := range members {
		if m.Voter {
			voters++
		}
		if m.ID == p.cfg.Cluster.ID() {
			selfVoter = m.Voter
			continue
		}
		if m.HTTPAddr != "" {
			peers = append(peers, m)
		}
	}
	return peers, voters, selfVoter
}

// FormHeader marks a peer copy whose body is the chunk store's stored form
// (chunkstore.Encode) rather than the raw bytes, with the value
// FormStored: the receiving peer decodes it to verify the digest and keeps
// it as it is, so a new chunk is compressed once, by the node that
// received it (--chunk-compression zstd), and travels compressed; an
// uncompressed body travels without the header. A peer that does not know the
// header finds a digest mismatch and refuses the copy; the copy is then
// sent again raw.
const (
	FormHeader = "X-Baton-Chunk-Form"
	FormStored = "stored"
)

// Replicate copies a body to every peer and returns once a majority of
// voters (this node included) holds it durably. stored, when not nil, is
// the body's stored form (chunkstore.Encode), sent instead of the raw
// body (FormHeader). Copies still in flight then finish in the
// background, until Close, within MaxCopyBacklog bytes of bodies (past
// it they are stopped); repair catches up any node that missed one. A
// cancelled ctx is returned as it is (ctx.Err()).
func (p *Plane) Replicate(ctx context.Context, digest string, body, stored []byte) error {
	peers, voters, selfVoter := p.peers()
	need := voters/2 + 1
	if selfVoter {
		need--
	}
	voterPeers := 0
	for _, m := range peers {
		if m.Voter {
			voterPeers++
		}
	}
	if voterPeers < need {
		return unavailablef("this node knows the address of %d voting peers and needs %d to hold the chunk; retry", voterPeers, need)
	}
	acks := make(chan copyAck, len(peers))
	cctx, cancel := context.WithTimeout(p.ctx, copyTimeout)
	pending := 0 // copies started and not yet answered
	defer func() { p.linger(acks, pending, cancel, int64(len(body)+len(stored))) }()
	for _, m := range peers {
		ok := p.spawn(func() {
			acks <- copyAck{m.Voter, p.copyTo(cctx, m.HTTPAddr, digest, body, stored)}
		})
		if !ok {
			return unavailablef("this node is shutting down")
		}
		pending++
	}
	ok, failed := 0, 0 // voters only: a non-voter's copy does not make a majority
	for ok < need {
		select {
		case a := <-acks:
			pending--
			switch {
			case !a.voter:
			case a.err != nil:
				failed++
				p.log.Debug("chunk copy to peer failed", "digest", digest, "err", a.err)
				if voterPeers-failed < need-ok {
					return unavailablef("could not copy the chunk to a majority of nodes")
				}
			default:
				ok++
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// copyAck is one peer's answer to a copy.
type copyAck struct {
	voter bool
	err   error
}

// linger leaves the pending copies of one Replicate to finish in the
// background, their body's size counted in the copy backlog until they
// do; when that goes past MaxCopyBacklog they are stopped now instead.
func (p *Plane) linger(acks <-chan copyAck, pending int, cancel context.CancelFunc, size int64) {
	if pending == 0 {
		cancel()
		return
	}
	if p.lingering.Add(size) > p.cfg.MaxCopyBacklog {
		p.stopped.Add(int64(pending))
		cancel() // the copies end at once; repair brings those peers the body
	}
	drain := func() {
		for range pending {
			<-acks
		}
		cancel()
		p.lingering.Add(-size)
	}
	if !p.spawn(drain) { // closing: p.ctx is cancelled, the copies end
		cancel()
		p.lingering.Add(-size)
	}
}

// CopyBacklog is the bytes of bodies held by copies to peers that
// Replicate left in flight.
func (p *Plane) CopyBacklog() int64 { return p.lingering.Load() }

// CopiesStopped counts the copies to peers stopped because the copy
// backlog was over MaxCopyBacklog.
func (p *Plane) CopiesStopped() int64 { return p.stopped.Load() }

// copyTo sends one copy to a peer: the stored form when there is one, and
// the raw body when the peer refuses that (a node that predates FormHeader).
func (p *Plane) copyTo(ctx context.Context, addr, digest string, body, stored []byte) error {
	path := "/v1/internal/chunks/" + digest
	if stored != nil {
		err := p.callForm(ctx, http.MethodPut, addr, path, stored, FormStored, nil)
		var st *statusError
		if !errors.As(err, &st) {
			return err
		}
		p.log.Debug("peer refused the stored form; sending raw", "peer", addr, "digest", digest, "err", err)
	}
	return p.call(ctx, http.MethodPut, addr, path, body, nil)
}

// statusError is a peer's answer outside 2xx.
type statusError struct{ msg string }

func (e *statusError) Error() string { return e.msg }

// Fetch gets a body from the first peer that has it, verifies it and
// stores it locally.
func (p *Plane) Fetch(ctx context.Context, digest string) ([]byte, error) {
	if p.cfg.Store == nil {
		return nil, unavailablef("this node has no chunk store")
	}
	peers, _, _ := p.peers()
	for _, m := range peers {
		var buf bytes.Buffer
		if err := p.call(ctx, http.MethodGet, m.HTTPAddr, "/v1/internal/chunks/"+digest, nil, &buf); err != nil {
			continue
		}
		if err := p.cfg.Store.Put(digest, buf.Bytes()); err != nil {
			continue // a peer's bad copy: try the next
		}
		return buf.Bytes(), nil
	}
	return nil, unavailablef("no node could supply chunk %s right now", digest)
}

// call makes a member's request to a peer's internal endpoint.
func (p *Plane) call(ctx context.Context, method, addr, path string, body []byte, out *bytes.Buffer) error {
	return p.callForm(ctx, method, addr, path, body, "", out)
}

// callForm is call with FormHeader set to form when form is not empty. A
// status outside 2xx is a *statusError.
func (p *Plane) callForm(ctx context.Context, method, addr, path string, body []byte, form string, out *bytes.Buffer) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.cfg.Peers.URL(addr, path), rd)
	if err != nil {
		return err
	}
	if form != "" {
		req.Header.Set(FormHeader, form)
	}
	resp, err := p.cfg.Peers.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return &statusError{fmt.Sprintf("%s %s: %s", method, addr, resp.Status)}
	}
	if out != nil {
		_, err = io.Copy(out, io.LimitReader(resp.Body, p.cfg.MaxChunkBody+1))
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// repairLoop makes this node hold every chunk body the replicated index
// says someone holds: a node that was down, is new, or lost a copy to
// corruption fetches the missing bodies from peers and verifies them. It
// also removes bodies that no tenant holds any more (after chunk GC), once
// they are older than the grace period, so an upload in flight is never
// swept.
func (p *Plane) repairLoop() {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	sweep := time.Now()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		if p.cfg.Store == nil {
			continue
		}
		p.repairOnce()
		if time.Since(sweep) > p.cfg.GCGrace/4 {
			p.sweepOnce()
			sweep = time.Now()
		}
	}
}

// repairOnce fetches up to 64 missing bodies; the next tick takes the rest.
// It counts every missing body as it goes: RepairBacklog.
func (p *Plane) repairOnce() {
	fetched, missing := 0, int64(0)
	stopped := false
	for _, d := range p.cfg.FSM.AllChunks() {
		if p.cfg.Store.Has(d) {
			continue
		}
		missing++
		if stopped || fetched >= 64 {
			continue
		}
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		_, err := p.Fetch(ctx, d)
		cancel()
		if err != nil {
			p.log.Debug("chunk repair", "digest", d, "err", err)
			stopped = true
			continue
		}
		fetched++
	}
	p.backlog.Store(missing - int64(fetched))
	if fetched > 0 {
		p.log.Info("repaired missing chunk bodies", "count", fetched)
	}
}

// RepairBacklog is how many chunk bodies the replicated index names that
// this node lacked at the end of the last repair pass.
func (p *Plane) RepairBacklog() int64 { return p.backlog.Load() }

func (p *Plane) sweepOnce() {
	cutoff := time.Now().Add(-p.cfg.GCGrace)
	_ = p.cfg.Store.Walk(func(d string, mod time.Time) {
		if mod.After(cutoff) {
			return
		}
		if _, known := p.cfg.FSM.ChunkKnown(d); !known {
			_ = p.cfg.Store.Remove(d)
		}
	})
}

// collectLoop runs on every node but acts only on the leader.
func (p *Plane) collectLoop() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		if p.cfg.Cluster.IsLeader() {
			p.maybeCollect()
		}
	}
}

// maybeCollect proposes chunk GC when an unreferenced chunk has outlived
// the grace period by the leader's clock.
func (p *Plane) maybeCollect() {
	oldest := p.cfg.FSM.OldestUnreferencedChunk()
	before := p.cfg.Now() - p.cfg.GCGrace.Milliseconds()
	if oldest == 0 || oldest >= before {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RequestTimeout)
	defer cancel()
	if _, err := p.cfg.Cluster.Apply(ctx, fsm.NewCommand(fsm.KindChunkGC, p.cfg.Now(), "", "", &fsm.ChunkGCArgs{Before: before, Max: 1000})); err != nil {
		p.log.Debug("chunk gc", "err", err)
	}
}
