package tlsconf

import (
	"crypto/x509"
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
