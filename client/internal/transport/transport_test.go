package transport

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWithScheme(t *testing.T) {
	for _, tc := range []struct {
		ep     string
		secure bool
		want   string
	}{
		{"10.0.0.1:7001", false, "http://10.0.0.1:7001"},
		{" 10.0.0.1:7001 ", true, "https://10.0.0.1:7001"},
		{"http://10.0.0.1:7001", true, "http://10.0.0.1:7001"}, // a scheme given stays
	} {
		if got := WithScheme(tc.ep, tc.secure); got != tc.want {
			t.Errorf("WithScheme(%q, %v) = %q, want %q", tc.ep, tc.secure, got, tc.want)
		}
	}
}

func TestEndpoint(t *testing.T) {
	if got, err := Endpoint("https://10.0.0.1:7001/"); err != nil || got != "https://10.0.0.1:7001" {
		t.Errorf("Endpoint: %q, %v; want the URL without its trailing slash", got, err)
	}
	for _, bad := range []string{"ftp://h:1", "http://", "http://u@h:1", "http://h:1/?q=1", "http://h:1/#f", "http://h:1/%zz"} {
		if _, err := Endpoint(bad); err == nil || !strings.HasPrefix(err.Error(), "client: invalid endpoint") {
			t.Errorf("Endpoint(%q): %v, want an invalid endpoint error", bad, err)
		}
	}
}

// TestTLSConfig: nothing given is nil (the system's roots); the base is
// cloned, and the CA file is added to a copy of its pool, not the
// caller's; a file without a certificate is refused.
func TestTLSConfig(t *testing.T) {
	if tc, err := TLSConfig(nil, "", "", ""); tc != nil || err != nil {
		t.Errorf("no settings: %v, %v; want nil, nil", tc, err)
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("no certificate here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	base := &tls.Config{RootCAs: pool, ServerName: "n1"}
	if _, err := TLSConfig(base, empty, "", ""); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("a CA file without a certificate: %v", err)
	}
	tc, err := TLSConfig(base, "", "", "")
	if err != nil || tc == base || tc.ServerName != "n1" {
		t.Errorf("base only: %+v, %v; want a clone of base", tc, err)
	}
	if _, err := TLSConfig(nil, "", filepath.Join(t.TempDir(), "absent.pem"), "absent-key.pem"); err == nil {
		t.Error("an absent client certificate was accepted")
	}
}

// TestHTTPClient: net/http's Transport with the TLS configuration given
// and a pool sized for many concurrent callers.
func TestHTTPClient(t *testing.T) {
	tc := &tls.Config{MinVersion: tls.VersionTLS13}
	tr, ok := HTTPClient(tc).Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T, want *http.Transport", HTTPClient(tc).Transport)
	}
	if tr.TLSClientConfig != tc || tr.MaxIdleConnsPerHost != 256 || tr.MaxIdleConns != 1024 {
		t.Errorf("TLS %p (want %p), idle per host %d, idle %d", tr.TLSClientConfig, tc, tr.MaxIdleConnsPerHost, tr.MaxIdleConns)
	}
	if tr == http.DefaultTransport {
		t.Error("the default transport itself, not a clone")
	}
}
