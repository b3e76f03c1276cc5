// Package transport is the Go SDK's HTTP set-up, which its users
// configure through client.Config and never call: endpoint URLs, the TLS
// configuration made of Config's files, and the default HTTP client.
package transport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// WithScheme gives an endpoint without a scheme one: https when secure
// (the default HTTP client has TLS settings), http otherwise. Surrounding
// spaces are dropped.
func WithScheme(ep string, secure bool) string {
	ep = strings.TrimSpace(ep)
	if strings.Contains(ep, "://") {
		return ep
	}
	if secure {
		return "https://" + ep
	}
	return "http://" + ep
}

// Endpoint checks that raw is an http(s) base URL and returns it without
// a trailing slash.
func Endpoint(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("client: invalid endpoint %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("client: invalid endpoint %q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("client: invalid endpoint %q: missing host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("client: invalid endpoint %q: must not have user info, query or fragment", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// HTTPClient is the default HTTP client: net/http's Transport, for http
// and https alike, with tc (nil: the system's roots), keeping up to 256
// idle connections per node for many concurrent callers.
func HTTPClient(tc *tls.Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tc
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}

// TLSConfig is the TLS configuration of the default HTTP client: base
// (cloned), with caFile's certificates as roots and certFile with keyFile
// as client certificate. Nil when none of them is given.
func TLSConfig(base *tls.Config, caFile, certFile, keyFile string) (*tls.Config, error) {
	if base == nil && caFile == "" && certFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		tc = base.Clone()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("client: CA file: %w", err)
		}
		if tc.RootCAs == nil {
			tc.RootCAs = x509.NewCertPool()
		} else {
			tc.RootCAs = tc.RootCAs.Clone() // not the caller's pool
		}
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: CA file %s holds no PEM certificate", caFile)
		}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client: client certificate: %w", err)
		}
		tc.Certificates = append(tc.Certificates, cert)
	}
	return tc, nil
}
