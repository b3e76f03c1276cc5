package main

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/baton-dev/baton/server/core/tlsconf"
	"github.com/prometheus/client_golang/prometheus"
)

// certExpiry is baton_tls_certificate_expiry_timestamp_seconds: when each
// certificate this node serves with stops being valid, for the alert rule
// that warns before it does (deploy/prometheus/alerts.yaml). Certificates
// are read once at start, so the figures do not change while it runs.
func certExpiry(peer *tlsconf.Peer, api *tlsconf.API) (prometheus.Collector, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "baton_tls_certificate_expiry_timestamp_seconds",
		Help: "When a certificate this node presents expires (its NotAfter, Unix seconds): certificate=\"api\" the API's (--tls-cert-file), \"peer\" the one for Raft and node-to-node calls (--peer-cert-file). Absent without TLS.",
	}, []string{"certificate"})
	for _, c := range []struct {
		name string
		cert *tls.Certificate
	}{{"api", apiCert(api)}, {"peer", peerCert(peer)}} {
		if c.cert == nil || len(c.cert.Certificate) == 0 {
			continue
		}
		leaf := c.cert.Leaf
		if leaf == nil {
			var err error
			if leaf, err = x509.ParseCertificate(c.cert.Certificate[0]); err != nil {
				return nil, err
			}
		}
		g.WithLabelValues(c.name).Set(float64(leaf.NotAfter.Unix()))
	}
	return g, nil
}

func apiCert(a *tlsconf.API) *tls.Certificate {
	if a == nil {
		return nil
	}
	return &a.Cert
}

func peerCert(p *tlsconf.Peer) *tls.Certificate {
	if p == nil {
		return nil
	}
	return &p.Cert
}
