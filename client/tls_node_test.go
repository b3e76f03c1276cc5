package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/client"
	"github.com/baton-dev/baton/cmd/batond/cluster"
	"github.com/baton-dev/baton/server/core/tlsconf"
)

// TestTLSConfig: the TLS settings reach the default client's transport,
// against a real batond serving TLS: the CA file is trusted, the client
// certificate is presented (one the node's CA signed is accepted, one of
// another CA is refused in the handshake), and an untrusted server is a
// final error, not one retried for the whole budget.
func TestTLSConfig(t *testing.T) {
	ctx := ctxTimeout(t, 2*time.Minute)
	cl, err := cluster.New(cluster.Config{Binary: env.Binary, BaseDir: t.TempDir(), Nodes: 1, Fast: true, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if err := cl.Start(ctx); err != nil {
		t.Fatalf("%v\n%s", err, cl.LogTail(0, 40))
	}
	if _, err := cl.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	issue := func(ca *tlsconf.CA, name string) tlsconf.Files {
		t.Helper()
		certPEM, keyPEM, err := ca.Issue(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		f := tlsconf.NodeFiles(dir, name)
		if err := os.WriteFile(f.Cert, certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.Key, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	caCert, caKey := tlsconf.CAFiles(cl.TLSDir())
	nodeCA, err := tlsconf.LoadCA(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsconf.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	agent, stranger := issue(nodeCA, "agent"), issue(other, "stranger")
	pool := x509.NewCertPool()
	pool.AddCert(nodeCA.Cert)

	for _, tc := range []struct {
		name    string
		cfg     client.Config
		refused bool // the handshake fails on the client certificate
	}{
		{"CAFile", client.Config{CAFile: cl.CAFile()}, false},
		{"CAFile and client certificate", client.Config{CAFile: cl.CAFile(), CertFile: agent.Cert, KeyFile: agent.Key}, false},
		{"client certificate of another CA", client.Config{CAFile: cl.CAFile(), CertFile: stranger.Cert, KeyFile: stranger.Key}, true},
		{"tls.Config", client.Config{TLS: &tls.Config{RootCAs: pool}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Endpoints, tc.cfg.MaxRetry = cl.Endpoints(), time.Second
			c := newClientCfg(t, tc.cfg)
			_, err := c.Do(ctx, http.MethodGet, "/healthz", nil, nil)
			if (err != nil) != tc.refused {
				t.Fatalf("got %v, want refused=%v", err, tc.refused)
			}
		})
	}

	otherFile := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(otherFile, other.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	c := newClientCfg(t, client.Config{Endpoints: cl.Endpoints(), CAFile: otherFile, MaxRetry: 20 * time.Second})
	_, err = c.Do(ctx, http.MethodGet, "/healthz", nil, nil)
	var verr *tls.CertificateVerificationError
	// Final: not retried until the 20s budget runs out (that error would
	// be ErrUnavailable and say it gave up).
	if !errors.As(err, &verr) || errors.Is(err, client.ErrUnavailable) || strings.Contains(err.Error(), "gave up") {
		t.Fatalf("an untrusted server: %v, want a final certificate error", err)
	}
	if _, err := client.New(client.Config{Endpoints: cl.Endpoints(), CertFile: agent.Cert}); err == nil {
		t.Error("CertFile without KeyFile was accepted")
	}
	if _, err := client.New(client.Config{Endpoints: cl.Endpoints(), CAFile: cl.CAFile(), HTTPClient: http.DefaultClient}); err == nil {
		t.Error("TLS settings with HTTPClient were accepted")
	}
}
