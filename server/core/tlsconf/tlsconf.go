// Package tlsconf builds Baton's TLS configurations and the certificates
// they need: a cluster CA and node certificates (ECDSA P-256, crypto/x509
// only), the API's server configuration, and the peer configuration of
// mutual TLS between members (Raft and node-to-node HTTP).
//
// A member trusts another member when the other presents a certificate
// that chains to the peer CA; a node certificate made here serves as both
// server and client certificate, so one file pair covers the API, Raft and
// the HTTP calls a node makes to its peers.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// HandshakeTimeout bounds a TLS handshake on an accepted or dialled peer
// connection, so that a silent socket cannot hold a goroutine.
const HandshakeTimeout = 10 * time.Second

// Peer is the mutual TLS of members: this node's certificate and the pool
// of the cluster (peer) CA that every member's certificate chains to.
type Peer struct {
	Cert tls.Certificate
	Pool *x509.CertPool
	// CAPEM is the peer CA file's content (HTTPClientConfig adds it to
	// the system roots).
	CAPEM []byte
}

// LoadPeer reads --peer-cert-file, --peer-key-file and --peer-ca-file.
func LoadPeer(certFile, keyFile, caFile string) (*Peer, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, errors.New("peer TLS needs a certificate, its key and the peer CA")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("peer certificate: %w", err)
	}
	pool, err := LoadPool(caFile)
	if err != nil {
		return nil, fmt.Errorf("peer CA: %w", err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	return &Peer{Cert: cert, Pool: pool, CAPEM: caPEM}, nil
}

// LoadPool reads PEM certificates from files into a new pool.
func LoadPool(files ...string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s holds no PEM certificate", f)
		}
	}
	return pool, nil
}

// ServerConfig is the Raft listener's configuration: a client certificate
// signed by the peer CA is required, and anything else fails the handshake.
func (p *Peer) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{p.Cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.Pool,
	}
}

// ClientConfig is the configuration of a member dialling a peer (Raft or
// HTTP): it presents this node's certificate and trusts only the peer CA.
// Give ServerName per dial (Clone and set it), or let net/http do it.
func (p *Peer) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{p.Cert},
		RootCAs:      p.Pool,
	}
}

// HTTPClientConfig is the configuration of a member's HTTP calls to its
// peers' API: it presents this node's certificate, and trusts the peer CA
// and the system's roots (the API certificate may come from either).
func HTTPClientConfig(p *Peer) *tls.Config {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	if p != nil {
		c.Certificates = []tls.Certificate{p.Cert}
		roots.AppendCertsFromPEM(p.CAPEM)
		if len(p.CAPEM) == 0 {
			c.RootCAs = p.Pool
		}
	}
	return c
}

// IsPeer reports whether a verified client certificate chain's leaf chains
// to the peer CA (for client authentication): the caller is a member.
func (p *Peer) IsPeer(certs []*x509.Certificate) bool {
	if p == nil || len(certs) == 0 {
		return false
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: p.Pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// API is the HTTP API's TLS: the server certificate, and the CAs whose
// client certificates it accepts.
type API struct {
	Cert tls.Certificate
	// ClientCA, when set (--client-ca-file), makes a client certificate
	// signed by it mandatory for every client (mTLS); peers present theirs.
	ClientCA *x509.CertPool
	// Peer, when set, lets members authenticate by their peer certificate.
	Peer *Peer
}

// LoadAPI reads --tls-cert-file, --tls-key-file and (optionally)
// --client-ca-file.
func LoadAPI(certFile, keyFile, clientCAFile string, peer *Peer) (*API, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("API certificate: %w", err)
	}
	a := &API{Cert: cert, Peer: peer}
	if clientCAFile != "" {
		if a.ClientCA, err = LoadPool(clientCAFile); err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
	}
	return a, nil
}

// ServerConfig is the API listener's configuration. Client certificates
// are verified against the client CA and the peer CA; with a client CA
// one is required, without one it is optional (a member presents its peer
// certificate, a user its bearer token).
func (a *API) ServerConfig() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{a.Cert}}
	if a.ClientCA == nil && a.Peer == nil {
		return c
	}
	// Two pools (x509.CertPool cannot be merged): the callback verifies
	// against either. ClientCAs stays empty, so that a client offers its
	// certificate whichever CA signed it.
	c.ClientAuth = tls.RequestClientCert
	if a.ClientCA != nil {
		c.ClientAuth = tls.RequireAnyClientCert
	}
	c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return nil // optional, and absent (RequireAnyClientCert refused none already)
		}
		certs := make([]*x509.Certificate, 0, len(raw))
		for _, r := range raw {
			cert, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs = append(certs, cert)
		}
		if a.Peer.IsPeer(certs) || verifies(certs, a.ClientCA) {
			return nil
		}
		return errors.New("client certificate is not signed by the client CA or the peer CA")
	}
	return c
}

func verifies(certs []*x509.Certificate, pool *x509.CertPool) bool {
	if pool == nil || len(certs) == 0 {
		return false
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// ServerName is the name to verify for a dialled host:port: its host.
func ServerName(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}
