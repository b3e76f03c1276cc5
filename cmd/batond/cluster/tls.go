package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/baton-dev/baton/server/core/tlsconf"
)

// tlsDirName, in BaseDir, holds the cluster's CA and node certificates
// when Config.TLS is set: ca.pem, ca-key.pem, n1.pem, n1-key.pem, ...
const tlsDirName = "tls"

// TLSDir is where the certificates of a TLS cluster live.
func (c *Cluster) TLSDir() string { return filepath.Join(c.cfg.BaseDir, tlsDirName) }

// CAFile is the CA certificate that signed every node's certificate (give
// it to clients: client.Config.CAFile, baton --cacert), or "" without TLS.
func (c *Cluster) CAFile() string {
	if !c.cfg.TLS {
		return ""
	}
	return tlsconf.NodeFiles(c.TLSDir(), "").CA
}

// Scheme is "https" for a TLS cluster, else "http".
func (c *Cluster) Scheme() string {
	if c.cfg.TLS {
		return "https"
	}
	return "http"
}

// ensureCerts makes the CA and the node certificates that are missing
// (valid for 127.0.0.1, localhost, Config.Hosts and the node id). A restarted cluster
// keeps its own. Called with c.mu held, before a node starts.
func (c *Cluster) ensureCerts() error {
	if !c.cfg.TLS {
		return nil
	}
	dir := c.TLSDir()
	caCert, caKey := tlsconf.CAFiles(dir)
	var ca *tlsconf.CA
	if _, err := os.Stat(caCert); err == nil {
		if ca, err = tlsconf.LoadCA(caCert, caKey); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	var missing []string
	for _, n := range c.nodes {
		if _, err := os.Stat(tlsconf.NodeFiles(dir, n.id).Cert); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, n.id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	hosts := append([]string{Host, "localhost"}, c.cfg.Hosts...)
	if _, err := tlsconf.Generate(dir, ca, missing, hosts); err != nil {
		return fmt.Errorf("cluster: certificates: %w", err)
	}
	return nil
}

// tlsArgs are a TLS node's flags: its certificate serves the API and the
// peers (Raft and node-to-node HTTP), under the cluster CA.
func tlsArgs(c Config, id string) []string {
	if !c.TLS {
		return nil
	}
	f := tlsconf.NodeFiles(filepath.Join(c.BaseDir, tlsDirName), id)
	return []string{
		"--tls-cert-file=" + f.Cert, "--tls-key-file=" + f.Key,
		"--peer-cert-file=" + f.Cert, "--peer-key-file=" + f.Key, "--peer-ca-file=" + f.CA,
	}
}

// caPool reads CAFile once it exists.
type caPool struct {
	file string
	mu   sync.Mutex
	pool *x509.CertPool
}

func (p *caPool) get() (*x509.CertPool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pool == nil {
		pool, err := tlsconf.LoadPool(p.file)
		if err != nil {
			return nil, err
		}
		p.pool = pool
	}
	return p.pool, nil
}

// ClientTLS is a TLS configuration that trusts the cluster's CA, for
// clients of a TLS cluster. The CA is read when a connection is made, so
// the configuration may be built before Start makes the certificates.
func (c *Cluster) ClientTLS() *tls.Config {
	p := &caPool{file: c.CAFile()}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verified below, against the CA as read at that time.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			pool, err := p.get()
			if err != nil {
				return err
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("cluster: the node presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: cs.ServerName})
			return err
		},
	}
}
