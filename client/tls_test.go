package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-dev/baton/server/core/tlsconf"
)

// The TLS settings reach the default client's transport: the CA file is trusted,
// the client certificate is presented, and an untrusted server is a
// final error, not one retried for the whole budget.
func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlsconf.Generate(dir, nil, []string{"server", "agent"}, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	srvFiles, agent := tlsconf.NodeFiles(dir, "server"), tlsconf.NodeFiles(dir, "agent")
	cert, err := tls.LoadX509KeyPair(srvFiles.Cert, srvFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	var gotClientCert string
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			gotClientCert = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`))
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	ts.StartTLS()
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, tc := range []struct {
		name     string
		cfg      Config
		wantCert string
	}{
		{"CAFile", Config{CAFile: srvFiles.CA}, ""},
		{"CAFile and client certificate", Config{CAFile: srvFiles.CA, CertFile: agent.Cert, KeyFile: agent.Key}, "agent"},
		{"tls.Config", Config{TLS: &tls.Config{RootCAs: pool}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotClientCert = ""
			tc.cfg.Endpoints = []string{ts.URL}
			c, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Do(ctx, http.MethodGet, "/healthz", nil, nil); err != nil {
				t.Fatal(err)
			}
			if gotClientCert != tc.wantCert {
				t.Errorf("client certificate %q, want %q", gotClientCert, tc.wantCert)
			}
		})
	}

	other, err := tlsconf.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	otherFile := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(otherFile, other.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Endpoints: []string{ts.URL}, CAFile: otherFile, MaxRetry: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Do(ctx, http.MethodGet, "/healthz", nil, nil)
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) || errors.Is(err, ErrUnavailable) || time.Since(start) > 5*time.Second {
		t.Fatalf("an untrusted server: %v after %v, want a final certificate error", err, time.Since(start))
	}
	if _, err := New(Config{Endpoints: []string{ts.URL}, CertFile: agent.Cert}); err == nil {
		t.Error("CertFile without KeyFile was accepted")
	}
	if _, err := New(Config{Endpoints: []string{ts.URL}, CAFile: srvFiles.CA, HTTPClient: http.DefaultClient}); err == nil {
		t.Error("TLS settings with HTTPClient were accepted")
	}
}

// The default HTTP client is net/http's Transport for plain HTTP too
// (the SDK's own plain-HTTP transport is gone), with TLS settings
// refused beside a caller's HTTPClient.
func TestDefaultHTTPClientTransport(t *testing.T) {
	for _, ep := range []string{"http://127.0.0.1:1", "https://127.0.0.1:1"} {
		c, err := New(Config{Endpoints: []string{ep}})
		if err != nil {
			t.Fatal(err)
		}
		tr, ok := c.hc.Transport.(*http.Transport)
		if !ok {
			t.Fatalf("%s: the default client's transport is %T, want *http.Transport", ep, c.hc.Transport)
		}
		if tr.MaxIdleConnsPerHost != 256 {
			t.Errorf("%s: MaxIdleConnsPerHost %d, want 256", ep, tr.MaxIdleConnsPerHost)
		}
	}
	if err := (Config{Endpoints: []string{"http://127.0.0.1:1"}, CAFile: "ca.pem",
		HTTPClient: http.DefaultClient}).Validate(); err == nil {
		t.Error("CAFile with an HTTPClient of the caller's: no error")
	}
}
