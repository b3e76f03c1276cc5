package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-dev/baton/server/core/tlsconf"
)

func TestCertsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	var out, errb bytes.Buffer
	if code := runCerts([]string{"--out", dir, "--nodes", "n1,n2", "--hosts", "10.0.0.1,baton.internal"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"ca.pem", "ca-key.pem", "n1.pem", "n1-key.pem", "n2.pem", "n2-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, "-key.pem") && st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	f := tlsconf.NodeFiles(dir, "n1")
	peer, err := tlsconf.LoadPeer(f.Cert, f.Key, f.CA)
	if err != nil {
		t.Fatal(err)
	}
	if peer.Cert.Leaf == nil {
		t.Fatal("no leaf")
	}
	for _, h := range []string{"10.0.0.1", "baton.internal", "n1"} {
		if err := peer.Cert.Leaf.VerifyHostname(h); err != nil {
			t.Errorf("n1's certificate: %v", err)
		}
	}
	before, _ := os.ReadFile(f.Cert)
	errb.Reset()
	if code := runCerts([]string{"--out", dir, "--nodes", "n1"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "refusing to overwrite") {
		t.Errorf("a second run over the same files: exit %d, %q", code, errb.String())
	}
	if after, _ := os.ReadFile(f.Cert); !bytes.Equal(before, after) {
		t.Error("n1.pem was overwritten")
	}
	ca, key := tlsconf.CAFiles(dir)
	other := filepath.Join(t.TempDir(), "n3")
	if code := runCerts([]string{"--out", other, "--nodes", "n3", "--ca-cert", ca, "--ca-key", key}, &out, &errb); code != 0 {
		t.Fatalf("with an existing CA: exit %d: %s", code, errb.String())
	}
	if _, err := tlsconf.LoadPeer(filepath.Join(other, "n3.pem"), filepath.Join(other, "n3-key.pem"), ca); err != nil {
		t.Errorf("n3 under the existing CA: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other, "ca-key.pem")); err == nil {
		t.Error("the CA key was copied next to the node certificate")
	}
}

func TestTLSFlagsValidate(t *testing.T) {
	for _, tc := range []struct {
		f  tlsFlags
		ok bool
	}{
		{tlsFlags{}, true},
		{tlsFlags{certFile: "c", keyFile: "k"}, true},
		{tlsFlags{certFile: "c"}, false},
		{tlsFlags{clientCAFile: "ca"}, false},
		{tlsFlags{certFile: "c", keyFile: "k", peerCertFile: "p", peerKeyFile: "pk", peerCAFile: "pca"}, true},
		{tlsFlags{certFile: "c", keyFile: "k", peerCertFile: "p", peerKeyFile: "pk"}, false},
		{tlsFlags{peerCertFile: "p", peerKeyFile: "pk", peerCAFile: "pca"}, false},
	} {
		if err := tc.f.validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok %v", tc.f, err, tc.ok)
		}
	}
}
