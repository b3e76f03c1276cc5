package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-dev/baton/client"
)

// Caller is an authenticated caller of /mcp.
type Caller struct {
	Token  string // the bearer token, which the session's calls carry
	Tenant string // the tenant its tools work in
	// Identity names the caller and tenant; a session answers only
	// requests of the identity that opened it.
	Identity string
}

// HTTPConfig configures the streamable HTTP endpoint.
type HTTPConfig struct {
	// Authenticate checks a request's bearer token and tenant before
	// anything is read; on false it has written the error answer.
	Authenticate func(w http.ResponseWriter, r *http.Request) (Caller, bool)
	// API serves the tools' calls in-process (the node's API handler).
	API http.Handler
	// MaxSessions bounds the live MCP sessions of this node; one more is
	// 503 (default 256).
	MaxSessions int
	// IdleTimeout ends a session that received no request for this long,
	// releasing its claim (default 10m).
	IdleTimeout time.Duration
	// MaxBodyBytes bounds one request's body (default 4 MiB).
	MaxBodyBytes int64
	Version      string
	Logger       *slog.Logger
}

// HTTPHandler serves MCP's streamable HTTP transport, one Session per MCP
// session.
type HTTPHandler struct {
	cfg    HTTPConfig
	inner  http.Handler
	shared *mcp.Server // answers the SDK's questions about a request outside a new session

	mu       sync.Mutex
	live     int
	sessions map[*Session][]*mcp.ServerSession
	wg       sync.WaitGroup
}

const headerSessionID = "Mcp-Session-Id"

// NewHTTPHandler returns the handler of /mcp.
func NewHTTPHandler(cfg HTTPConfig) *HTTPHandler {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 256
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &HTTPHandler{cfg: cfg, sessions: map[*Session][]*mcp.ServerSession{}}
	h.shared = mcp.NewServer(&mcp.Implementation{Name: "baton", Version: cfg.Version}, nil)
	streamable := mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{
		SessionTimeout:      cfg.IdleTimeout,
		MaxRequestBodyBytes: cfg.MaxBodyBytes,
		Logger:              cfg.Logger,
	})
	// The SDK binds each session to the identity that opened it: a request
	// with another token (or tenant) on that session id is refused.
	h.inner = auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		c, _ := ctx.Value(callerKey{}).(*Caller)
		if c == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.Identity}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(streamable)
	return h
}

type callerKey struct{}
type pendingKey struct{}

// pending is the session a request without a session id may open.
type pending struct {
	h      *HTTPHandler
	caller Caller
	once   sync.Once
	srv    *mcp.Server
	sess   *Session
}

func (p *pending) get() *mcp.Server {
	p.once.Do(func() {
		c, err := client.New(client.Config{Endpoints: []string{"http://baton.local"}, Token: p.caller.Token, NoSession: true,
			HTTPClient: &http.Client{Transport: &LocalTransport{Handler: p.h.cfg.API}}})
		if err != nil {
			return
		}
		p.srv, p.sess = New(Config{Client: c, Tenant: p.caller.Tenant, Version: p.h.cfg.Version, Logger: p.h.cfg.Logger})
	})
	return p.srv
}

// server is the SDK's getServer: a new session's own server, made once
// per request that opens one; the shared one otherwise (the SDK only
// reads its protocol versions then).
func (h *HTTPHandler) server(r *http.Request) *mcp.Server {
	if p, ok := r.Context().Value(pendingKey{}).(*pending); ok {
		return p.get()
	}
	return h.shared
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	caller, ok := h.cfg.Authenticate(w, r)
	if !ok {
		return
	}
	ctx := context.WithValue(r.Context(), callerKey{}, &caller)
	if r.Method != http.MethodPost || r.Header.Get(headerSessionID) != "" {
		h.inner.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	// A POST without a session id may open a session: it takes a place.
	h.mu.Lock()
	if h.live >= h.cfg.MaxSessions {
		h.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		writeJSONError(w, http.StatusServiceUnavailable, "unavailable",
			"this node holds its maximum of MCP sessions (--mcp-max-sessions); end one, or try another node")
		return
	}
	h.live++
	h.mu.Unlock()
	p := &pending{h: h, caller: caller}
	h.inner.ServeHTTP(w, r.WithContext(context.WithValue(ctx, pendingKey{}, p)))
	var opened []*mcp.ServerSession
	if p.srv != nil {
		for ss := range p.srv.Sessions() {
			opened = append(opened, ss)
		}
	}
	if len(opened) == 0 {
		if p.sess != nil {
			p.sess.Close()
		}
		h.release(nil)
		return
	}
	h.mu.Lock()
	h.sessions[p.sess] = opened
	h.mu.Unlock()
	h.wg.Go(func() {
		for _, ss := range opened {
			_ = ss.Wait()
		}
		p.sess.Close()
		h.release(p.sess)
	})
}

func (h *HTTPHandler) release(s *Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live--
	delete(h.sessions, s)
}

// Live returns the number of open sessions.
func (h *HTTPHandler) Live() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live
}

// Close ends every session, releasing their claims, and waits for them.
func (h *HTTPHandler) Close() {
	h.mu.Lock()
	var all []*mcp.ServerSession
	for _, ss := range h.sessions {
		all = append(all, ss...)
	}
	h.mu.Unlock()
	for _, ss := range all {
		_ = ss.Close()
	}
	h.wg.Wait()
}

// writeJSONError answers with Baton's error object.
func writeJSONError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
