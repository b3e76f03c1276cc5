package server

import (
	"crypto/tls"
	"crypto/x509"
	"net/http/httptest"
	"testing"

	"github.com/baton-dev/baton/fsm"
	"github.com/baton-dev/baton/server/core/tlsconf"
)

func leafOf(t *testing.T, ca *tlsconf.CA, name string) *x509.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(name, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// With peer TLS, a member is known by its verified certificate, on the
// peer routes only; a forwarded request names the member the forwarding
// peer vouches for, and nobody else can make that claim; the internal
// routes refuse the admin token.
func TestPeerIdentity(t *testing.T) {
	ca, err := tlsconf.NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsconf.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	s := &Server{cfg: Config{PeerTLS: &tlsconf.Peer{Pool: pool}, AdminToken: "admin"}, fsm: fsm.New()}
	s.adminHash = New(Config{AdminToken: "admin"}, nil, fsm.New()).adminHash
	member, stranger := leafOf(t, ca, "n2"), leafOf(t, other, "n2")

	const internal, internalPattern = "/v1/internal/chunks/sha256:00", "/v1/internal/chunks/{digest}"
	type req struct {
		name, method, path, pattern string
		cert                        *x509.Certificate
		headers                     map[string]string
		wantPeer                    string
		wantAuth                    bool // authenticate succeeds
	}
	for _, tc := range []req{
		{"member on an internal route", "PUT", internal, internalPattern, member, nil, "n2", true},
		{"member asks for the configuration", "GET", "/v1/internal/configuration", "/v1/internal/configuration", member, nil, "n2", true},
		{"stranger asks for the configuration", "GET", "/v1/internal/configuration", "/v1/internal/configuration", stranger, nil, "", false},
		{"member on a join", "POST", "/v1/cluster/members", "/v1/cluster/members", member, nil, "n2", true},
		{"member off the peer routes", "PUT", "/v1/tenants/acme", "/v1/tenants/{tenant}", member, nil, "", false},
		{"another CA's certificate", "PUT", internal, internalPattern, stranger, nil, "", false},
		{"no certificate, admin token", "PUT", internal, internalPattern, nil,
			map[string]string{"Authorization": "Bearer admin"}, "", false},
		{"no certificate, admin token, HEAD", "HEAD", internal, internalPattern, nil,
			map[string]string{"Authorization": "Bearer admin"}, "", false},
		{"admin token on a join still works", "POST", "/v1/cluster/members", "/v1/cluster/members", nil,
			map[string]string{"Authorization": "Bearer admin"}, "", true},
		{"forwarded for a member", "PUT", internal, internalPattern, member,
			map[string]string{headerForwarded: "n1", headerPeer: "n3"}, "n3", true},
		{"forwarded for a user", "PUT", internal, internalPattern, member,
			map[string]string{headerForwarded: "n1"}, "", false},
		{"a claim without a member's certificate", "PUT", internal, internalPattern, stranger,
			map[string]string{headerForwarded: "n1", headerPeer: "n3"}, "", false},
		{"a claim without any certificate", "PUT", internal, internalPattern, nil,
			map[string]string{headerForwarded: "n1", headerPeer: "n3"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			r.Pattern = tc.pattern
			r.TLS = &tls.ConnectionState{}
			if tc.cert != nil {
				r.TLS.PeerCertificates = []*x509.Certificate{tc.cert}
			}
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			if got := s.peerOf(r); got != tc.wantPeer {
				t.Errorf("peerOf = %q, want %q", got, tc.wantPeer)
			}
			id, err := s.authenticate(r)
			if (err == nil) != tc.wantAuth {
				t.Fatalf("authenticate: %+v, %v; want success %v", id, err, tc.wantAuth)
			}
		})
	}
}
