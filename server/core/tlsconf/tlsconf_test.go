package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	ca, err := Generate(dir, nil, []string{"n1", "n2"}, []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	caCert, caKey := CAFiles(dir)
	for _, f := range []string{caKey, NodeFiles(dir, "n1").Key, NodeFiles(dir, "n2").Key} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	f := NodeFiles(dir, "n1")
	peer, err := LoadPeer(f.Cert, f.Key, f.CA)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(peer.Cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("n1"); err != nil {
		t.Error(err)
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	if !peer.IsPeer([]*x509.Certificate{leaf}) {
		t.Error("a node certificate is not a peer's")
	}
	other, _ := NewCA("other")
	otherPeer := &Peer{Pool: x509.NewCertPool()}
	otherPeer.Pool.AddCert(other.Cert)
	if otherPeer.IsPeer([]*x509.Certificate{leaf}) {
		t.Error("a certificate of another CA counts as a peer's")
	}

	// Nothing is overwritten: not the CA, not a node's files.
	if _, err := Generate(dir, nil, []string{"n3"}, nil); err == nil {
		t.Error("a second CA overwrote the first")
	}
	if _, err := Generate(dir, ca, []string{"n2"}, nil); err == nil {
		t.Error("n2's files were overwritten")
	}
	// Reusing the CA (as batond certs --ca-cert/--ca-key does) adds a node.
	loaded, err := LoadCA(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(dir, loaded, []string{"n3"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPeer(NodeFiles(dir, "n3").Cert, NodeFiles(dir, "n3").Key, caCert); err != nil {
		t.Fatal(err)
	}
}

// The API's server configuration: with a client CA every client needs a
// certificate from it or from the peer CA; without one a certificate is
// optional, but one from an unknown CA still fails the handshake.
func TestAPIServerConfig(t *testing.T) {
	dir := t.TempDir()
	peerDir, clientDir := filepath.Join(dir, "peer"), filepath.Join(dir, "clients")
	if _, err := Generate(peerDir, nil, []string{"n1", "n2"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(clientDir, nil, []string{"agent"}, nil); err != nil {
		t.Fatal(err)
	}
	strangerDir := filepath.Join(dir, "stranger")
	if _, err := Generate(strangerDir, nil, []string{"x"}, nil); err != nil {
		t.Fatal(err)
	}
	n1, n2 := NodeFiles(peerDir, "n1"), NodeFiles(peerDir, "n2")
	peer, err := LoadPeer(n1.Cert, n1.Key, n1.CA)
	if err != nil {
		t.Fatal(err)
	}
	pair := func(f Files) []tls.Certificate {
		c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	for _, withClientCA := range []bool{false, true} {
		caFile := ""
		if withClientCA {
			caFile = NodeFiles(clientDir, "agent").CA
		}
		api, err := LoadAPI(n1.Cert, n1.Key, caFile, peer)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		ts.TLS = api.ServerConfig()
		ts.StartTLS()
		for _, tc := range []struct {
			name  string
			certs []tls.Certificate
			ok    bool
		}{
			{"no certificate", nil, !withClientCA},
			{"a member's", pair(n2), true},
			{"a client's", pair(NodeFiles(clientDir, "agent")), withClientCA},
			{"a stranger's", pair(NodeFiles(strangerDir, "x")), false},
		} {
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: peer.Pool, Certificates: tc.certs}}}
			resp, err := hc.Get(ts.URL)
			if err == nil {
				resp.Body.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("client CA %v, %s: %v, want ok %v", withClientCA, tc.name, err, tc.ok)
			}
			hc.CloseIdleConnections()
		}
		ts.Close()
	}
}
