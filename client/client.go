package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/client/internal/transport"
)

// Defaults for Config fields left zero.
const (
	DefaultTimeout  = 10 * time.Second // per attempt
	DefaultMaxRetry = 15 * time.Second // total retry budget of one call
)

// Config configures a Client.
type Config struct {
	// Endpoints are the nodes' base URLs ("https://10.0.0.1:7001") or
	// addresses ("10.0.0.1:7001"): an address without a scheme is https
	// when TLS, CAFile or CertFile is set, http otherwise, as in the CLI.
	// At least one is required (FromEnv reads them from BATON_ENDPOINTS).
	Endpoints []string
	// Token is sent as "Authorization: Bearer <Token>" when not empty.
	Token string
	// HTTPClient is used for every request; nil means the default: a
	// net/http Transport (TLS from the fields below) whose pool of
	// kept-alive connections is sized for many concurrent callers. Its
	// Timeout, if any, applies on top of Config.Timeout.
	HTTPClient *http.Client
	// Timeout bounds one attempt against one endpoint (default 10s).
	Timeout time.Duration
	// MaxRetry bounds the time spent retrying one call (default 15s).
	MaxRetry time.Duration
	// DialRetry, when positive and shorter than MaxRetry, bounds the time
	// spent retrying a call while no endpoint has accepted a connection
	// (every attempt refused, unreachable or timed out dialing): wrong
	// endpoints or a cluster that is down fail the call with
	// ErrUnavailable after DialRetry instead of MaxRetry. Once any
	// endpoint accepts a connection (a node answering 503 during an
	// election, say), MaxRetry applies. Zero: MaxRetry alone.
	DialRetry time.Duration
	// NoSession makes every write carry a random Idempotency-Key instead
	// of a place in a client session (session.go). For a short-lived
	// process that writes once or twice (the CLI), where opening a
	// session would cost a write of its own; the cluster keeps each such
	// key's answer within its idempotency window and byte budget.
	NoSession bool

	// TLS configures https endpoints: the CAs to trust and the client
	// certificate, if the cluster asks for one. Nil means the system's
	// roots and no client certificate, unless CAFile, CertFile or KeyFile
	// are given. Not used with HTTPClient (configure its Transport).
	TLS *tls.Config
	// CAFile is a PEM file of the CA(s) that signed the nodes' API
	// certificates (batond certs: ca.pem), trusted instead of the
	// system's roots; it is added to TLS.RootCAs when TLS is given too.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key (PEM),
	// for a cluster started with --client-ca-file.
	CertFile, KeyFile string
}

// Validate reports the first problem with c, if any.
func (c Config) Validate() error {
	if len(c.Endpoints) == 0 {
		return errors.New("client: no endpoints: set Config.Endpoints (host:port or URLs), or build the client with client.FromEnv, which reads BATON_ENDPOINTS")
	}
	for i, ep := range c.Endpoints {
		if strings.TrimSpace(ep) == "" {
			return fmt.Errorf("client: endpoint %d of %d in Config.Endpoints is empty (an empty BATON_ENDPOINTS split on commas? client.FromEnv skips blanks)", i+1, len(c.Endpoints))
		}
		if _, err := transport.Endpoint(c.endpointURL(ep)); err != nil {
			return err
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("client: timeout must not be negative, got %v", c.Timeout)
	}
	if c.MaxRetry < 0 {
		return fmt.Errorf("client: max retry must not be negative, got %v", c.MaxRetry)
	}
	if c.DialRetry < 0 {
		return fmt.Errorf("client: dial retry must not be negative, got %v", c.DialRetry)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("client: give both CertFile and KeyFile, or neither")
	}
	if c.HTTPClient != nil && (c.TLS != nil || c.CAFile != "" || c.CertFile != "") {
		return errors.New("client: TLS settings apply to the default HTTP client: configure HTTPClient's Transport instead")
	}
	return nil
}

// Client talks to a Baton cluster. It is safe for concurrent use.
type Client struct {
	endpoints []string
	hosts     []string // host:port of each endpoint, to recognise the leader
	token     string
	hc        *http.Client
	timeout   time.Duration
	maxRetry  time.Duration
	dialRetry time.Duration // 0: none (Config.DialRetry)
	preferred atomic.Int64  // index of the endpoint that last answered
	sess      sessions      // for exactly-once retries (session.go)
}

// New validates cfg and returns a Client. It does no I/O.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{
		sess:      sessions{off: cfg.NoSession},
		token:     cfg.Token,
		hc:        cfg.HTTPClient,
		timeout:   cfg.Timeout,
		maxRetry:  cfg.MaxRetry,
		dialRetry: cfg.DialRetry,
	}
	for _, ep := range cfg.Endpoints {
		norm, _ := transport.Endpoint(cfg.endpointURL(ep))
		c.endpoints = append(c.endpoints, norm)
		host := ""
		if u, err := url.Parse(norm); err == nil {
			host = u.Host
		}
		c.hosts = append(c.hosts, host)
	}
	if c.hc == nil {
		tc, err := cfg.tlsConfig()
		if err != nil {
			return nil, err
		}
		c.hc = transport.HTTPClient(tc)
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxRetry == 0 {
		c.maxRetry = DefaultMaxRetry
	}
	return c, nil
}

// Endpoints returns the normalized endpoints, in configuration order.
func (c *Client) Endpoints() []string {
	return append([]string(nil), c.endpoints...)
}

// endpointURL gives an endpoint without a scheme one: https when the
// default HTTP client has TLS settings, http otherwise.
func (c Config) endpointURL(ep string) string {
	return transport.WithScheme(ep, c.TLS != nil || c.CAFile != "" || c.CertFile != "")
}

// tlsConfig is the TLS configuration of the default HTTP client (nil when
// none is set).
func (c Config) tlsConfig() (*tls.Config, error) {
	return transport.TLSConfig(c.TLS, c.CAFile, c.CertFile, c.KeyFile)
}
