// Package mcpserver serves Baton to agents as Model Context Protocol tools
// and resources (docs/mcp.md), with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// One Session is one agent's MCP session: its tools call the cluster
// through the Go SDK (client/) with the agent's own token, so every call is
// authenticated and authorized exactly as the same HTTP route is. The
// session keeps the agent's current claim (task and fencing token), so the
// model never copies a token between turns: every write of the session
// carries that token as its fence, a goroutine renews the lease while the
// session lives, and Close releases the claim.
//
// `baton mcp` serves one Session over stdio; batond serves one per MCP
// session of the streamable HTTP transport at /mcp (NewHTTPHandler), its
// calls made in-process against the node's own API handler.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/client"
)

// Config configures one session's tools.
type Config struct {
	// Client calls the cluster; its token is the agent's.
	Client *client.Client
	// Tenant is the tenant every tool works in.
	Tenant string
	// Owner is the worker name of the session's claims; "" makes one up
	// ("mcp-" and 12 random hex digits).
	Owner string
	// Files lets publish_artifact read a local file (the stdio server,
	// which runs as the agent's own user). Never set over HTTP.
	Files bool
	// Version is reported as the server's implementation version.
	Version string
	Logger  *slog.Logger
}

// Defaults and bounds of the tools.
const (
	DefaultLease    = 60 * time.Second
	MaxLease        = 24 * time.Hour
	MaxClaimWait    = 60 * time.Second
	MaxChangeWait   = 60 * time.Second
	DefaultChange   = 30 * time.Second
	MaxReadBytes    = 1 << 20 // content read_artifact returns to the model
	MaxPublishBytes = 64 << 20
	releaseTimeout  = 10 * time.Second
)

// Session is one agent's MCP session: its tools and its current claim.
type Session struct {
	cfg    Config
	ctx    context.Context // the session's lifetime; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	claim  *claim // nil: no task held
	closed bool
}

// claim is the task the session holds.
type claim struct {
	task, queue string
	token       uint64
	lease       time.Duration
	leaseUntil  time.Time
	lost        error         // set once the lease is known lost (fenced, task gone)
	stop        chan struct{} // closed to end the renewal
}

// New returns the MCP server of one session and the session.
func New(cfg Config) (*mcp.Server, *Session) {
	if cfg.Owner == "" {
		cfg.Owner = "mcp-" + uuid.NewString()[24:]
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Session{cfg: cfg}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	srv := mcp.NewServer(&mcp.Implementation{Name: "baton", Title: "Baton coordination store", Version: cfg.Version},
		&mcp.ServerOptions{Instructions: instructions, Capabilities: &mcp.ServerCapabilities{}})
	s.addTools(srv)
	s.addResources(srv)
	return srv, s
}

const instructions = `Baton coordinates agents: claim a task from a queue, do the work, publish what you produced as an artifact, and complete the task. ` +
	`This session remembers your current claim and its fencing token: you never pass tokens; every write you make is fenced by your claim, and your lease is renewed while the session lives. ` +
	`If a tool says your lease was lost, stop working on that task: another worker owns it.`

// Close ends the session: it stops the renewal and releases the claim the
// session holds (the task goes back to its queue). Idempotent.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	cl := s.claim
	s.claim = nil
	s.mu.Unlock()
	if cl != nil {
		close(cl.stop)
		if cl.lost == nil {
			ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			release := true
			_, err := s.cfg.Client.UpdateTask(ctx, s.cfg.Tenant, cl.task, client.UpdateTaskRequest{FencingToken: &cl.token, Release: &release})
			cancel()
			if err != nil {
				s.cfg.Logger.Warn("mcp: releasing the session's claim failed", "tenant", s.cfg.Tenant, "task", cl.task, "err", err)
			}
		}
	}
	s.cancel()
	s.wg.Wait()
}

// current returns the live claim, or an error the model can act on.
func (s *Session) current() (*claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.claim == nil:
		return nil, errors.New("you hold no task: claim one with claim_task first")
	case s.claim.lost != nil:
		cl := s.claim
		s.claim = nil
		return nil, cl.lost
	}
	return s.claim, nil
}

// fence is the guard of a write: the current claim's, or nil without one.
// A claim known to be lost refuses the write before it is sent.
func (s *Session) fence() (*client.Fence, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claim == nil {
		return nil, nil
	}
	if s.claim.lost != nil {
		cl := s.claim
		s.claim = nil
		return nil, cl.lost
	}
	return &client.Fence{TaskID: s.claim.task, Token: s.claim.token}, nil
}

// hold makes t the session's claim and starts renewing its lease. A
// session holds one claim: when another claim_task call of the session
// got its task first (an MCP client may run tool calls concurrently), t
// is given back unstarted and the call is refused, so no claim is left
// renewed with nobody to finish it.
func (s *Session) hold(ctx context.Context, t *client.Task, lease time.Duration) error {
	cl := &claim{task: t.TaskID, queue: t.Queue, token: t.FencingToken, lease: lease, stop: make(chan struct{})}
	if t.LeaseUntil != nil {
		cl.leaseUntil = *t.LeaseUntil
	}
	var refuse error
	s.mu.Lock()
	switch {
	case s.closed:
		refuse = errors.New("the session is closing")
	case s.claim != nil && s.claim.lost == nil:
		refuse = alreadyHolding(s.claim)
	default:
		s.claim = cl // a lost claim's renewal has already stopped
		s.wg.Go(func() { s.renew(cl) })
	}
	s.mu.Unlock()
	if refuse != nil {
		s.giveBack(ctx, cl)
	}
	return refuse
}

// alreadyHolding refuses a claim_task of a session that holds cl.
func alreadyHolding(cl *claim) error {
	return fmt.Errorf("claim_task: you already hold task %q of queue %q: finish it with complete_task or fail_task before claiming another", cl.task, cl.queue)
}

// giveBack releases a claim the session will not keep, as never started
// (its attempt is not counted). A failure leaves the task to its lease.
func (s *Session) giveBack(ctx context.Context, cl *claim) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(cl.lease/3, time.Second))
	defer cancel()
	release := true
	_, _ = s.cfg.Client.UpdateTask(ctx, s.cfg.Tenant, cl.task, client.UpdateTaskRequest{
		FencingToken: &cl.token, Release: &release, Unstarted: true})
}

// drop forgets cl (finished, failed or lost) and stops its renewal.
func (s *Session) drop(cl *claim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claim == cl {
		s.claim = nil
		close(cl.stop)
	}
}

// renew renews cl's lease every third of it until it is dropped, the
// session ends, or the lease is found lost.
func (s *Session) renew(cl *claim) {
	t := time.NewTicker(max(cl.lease/3, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-cl.stop:
			return
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, max(cl.lease/3, time.Second))
		task, err := s.cfg.Client.RenewTask(ctx, s.cfg.Tenant, cl.task, client.RenewRequest{FencingToken: cl.token, Lease: cl.lease})
		cancel()
		s.mu.Lock()
		switch {
		case err == nil && task.LeaseUntil != nil:
			cl.leaseUntil = *task.LeaseUntil
		case errors.Is(err, client.ErrFenced) || errors.Is(err, client.ErrNotFound) || errors.Is(err, client.ErrForbidden):
			cl.lost = lostError(cl, err)
		}
		lost := cl.lost != nil
		s.mu.Unlock()
		if lost {
			return
		}
		// Other failures (no leader for a moment) are tried again next
		// tick; the lease outlives two of them.
	}
}

// lostError is what a tool says once the claim's lease is gone.
func lostError(cl *claim, err error) error {
	var e *client.Error
	if errors.As(err, &e) {
		if cur, ok := e.DetailUint("current_token"); ok && cur != 0 {
			return fmt.Errorf("your lease on task %q was lost and another worker owns the task now (its fencing token %d replaced yours, %d); stop working on it and do not publish its results: claim another task with claim_task",
				cl.task, cur, cl.token)
		}
	}
	return fmt.Errorf("your lease on task %q was lost (%v); stop working on it and do not publish its results: claim another task with claim_task", cl.task, err)
}
