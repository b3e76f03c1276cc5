package main

import (
	"testing"

	"github.com/baton-dev/baton/server/core/tlsconf"
	"github.com/prometheus/client_golang/prometheus"
)

// The expiry gauge carries each certificate's NotAfter; without TLS it
// has no series.
func TestCertExpiry(t *testing.T) {
	dir := t.TempDir()
	if _, err := tlsconf.Generate(dir, nil, []string{"n1"}, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	f := tlsconf.NodeFiles(dir, "n1")
	peer, err := tlsconf.LoadPeer(f.Cert, f.Key, f.CA)
	if err != nil {
		t.Fatal(err)
	}
	api, err := tlsconf.LoadAPI(f.Cert, f.Key, "", peer)
	if err != nil {
		t.Fatal(err)
	}
	leaf := api.Cert.Leaf
	if leaf == nil {
		t.Fatal("LoadX509KeyPair left Leaf nil")
	}
	for _, tc := range []struct {
		name      string
		peer      *tlsconf.Peer
		api       *tlsconf.API
		wantCerts []string
	}{
		{"no TLS", nil, nil, nil},
		{"API and peer", peer, api, []string{"api", "peer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := certExpiry(tc.peer, tc.api)
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, mf := range mfs {
				if mf.GetName() != "baton_tls_certificate_expiry_timestamp_seconds" {
					t.Errorf("unexpected metric %s", mf.GetName())
				}
				for _, m := range mf.GetMetric() {
					got = append(got, m.GetLabel()[0].GetValue())
					if v := m.GetGauge().GetValue(); v != float64(leaf.NotAfter.Unix()) {
						t.Errorf("%s: %v, want NotAfter %d", m.GetLabel()[0].GetValue(), v, leaf.NotAfter.Unix())
					}
				}
			}
			if len(got) != len(tc.wantCerts) || (len(got) > 0 && (got[0] != tc.wantCerts[0] || got[1] != tc.wantCerts[1])) {
				t.Errorf("certificates %v, want %v", got, tc.wantCerts)
			}
		})
	}
}
