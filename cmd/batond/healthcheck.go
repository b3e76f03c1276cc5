package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

const healthcheckUsageText = `batond healthcheck: ask a node whether it is ready; exit 0 if it answers 200.

Usage:
  batond healthcheck [--url https://127.0.0.1:7001/readyz] [--cacert ca.pem]
                     [--cert client.pem --key client-key.pem] [--timeout 3s]

For a container's HEALTHCHECK (an image FROM scratch has no shell or curl).
Exit status: 0 when the node answers 200, 1 when it answers anything else
or cannot be reached, 2 on a usage error.

Without --url, the node's own configuration in the environment decides:
the port of BATON_HTTP_ADDR on 127.0.0.1 (default 7001), over https when
BATON_TLS_CERT_FILE is set, path /readyz; the certificate is then verified
for the host of BATON_ADVERTISE_HTTP_ADDR when that is set (or
--server-name). --cacert defaults to BATON_PEER_CA_FILE, and --cert/--key
to BATON_PEER_CERT_FILE/BATON_PEER_KEY_FILE when BATON_CLIENT_CA_FILE asks
clients for a certificate. Flags win over all of these.

Flags:
`

type healthcheckOptions struct {
	url, cacert, cert, key, serverName string
	timeout                            time.Duration
}

// parseHealthcheckFlags reads the flags, with defaults from the node's
// BATON_* environment (getenv).
func parseHealthcheckFlags(args []string, getenv func(string) (string, bool), stderr io.Writer) (*healthcheckOptions, error) {
	env := func(k string) string { v, _ := getenv(k); return v }
	o := &healthcheckOptions{}
	fs := flag.NewFlagSet("batond healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, healthcheckUsageText); fs.PrintDefaults() }
	fs.StringVar(&o.url, "url", "", "URL to GET (default: from BATON_HTTP_ADDR and BATON_TLS_CERT_FILE, path /readyz)")
	fs.StringVar(&o.cacert, "cacert", env("BATON_PEER_CA_FILE"), "CA certificate (PEM) that signed the node's API certificate")
	fs.StringVar(&o.cert, "cert", "", "client certificate (PEM), for a node that requires one")
	fs.StringVar(&o.key, "key", "", "key of --cert (PEM)")
	fs.StringVar(&o.serverName, "server-name", "", "name to verify the node's certificate for (default: the URL's host, or BATON_ADVERTISE_HTTP_ADDR's when --url is not given)")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Second, "time limit for the request")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	if o.cert == "" && o.key == "" && env("BATON_CLIENT_CA_FILE") != "" {
		o.cert, o.key = env("BATON_PEER_CERT_FILE"), env("BATON_PEER_KEY_FILE")
	}
	if o.url == "" {
		scheme, port := "http", "7001"
		if env("BATON_TLS_CERT_FILE") != "" {
			scheme = "https"
		}
		if a := env("BATON_HTTP_ADDR"); a != "" {
			_, p, err := net.SplitHostPort(a)
			if err != nil {
				return nil, fmt.Errorf("BATON_HTTP_ADDR %q: want host:port", a)
			}
			port = p
		}
		if a := env("BATON_ADVERTISE_HTTP_ADDR"); a != "" && o.serverName == "" {
			if h, _, err := net.SplitHostPort(a); err == nil {
				o.serverName = h
			}
		}
		o.url = scheme + "://" + net.JoinHostPort("127.0.0.1", port) + "/readyz"
	}
	u, err := url.Parse(o.url)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("--url %q: want http(s)://HOST:PORT/PATH", o.url)
	case (o.cert == "") != (o.key == ""):
		return nil, errors.New("give both --cert and --key, or neither")
	case o.timeout <= 0:
		return nil, fmt.Errorf("--timeout %v: must be positive", o.timeout)
	}
	return o, nil
}

// runHealthcheck is `batond healthcheck`; it returns the exit status.
func runHealthcheck(ctx context.Context, args []string, getenv func(string) (string, bool), stdout, stderr io.Writer) int {
	o, err := parseHealthcheckFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "batond healthcheck:", err)
		return 2
	}
	if err := healthcheck(ctx, o); err != nil {
		fmt.Fprintln(stderr, "batond healthcheck:", err)
		return 1
	}
	fmt.Fprintln(stdout, "ok:", o.url)
	return 0
}

func healthcheck(ctx context.Context, o *healthcheckOptions) error {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.serverName}
	if o.cacert != "" {
		pem, err := os.ReadFile(o.cacert)
		if err != nil {
			return fmt.Errorf("--cacert: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--cacert %s: no PEM certificate in it", o.cacert)
		}
	}
	if o.cert != "" {
		c, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return fmt.Errorf("--cert/--key: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, Proxy: nil}, Timeout: o.timeout}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", o.url, resp.Status, bytes.TrimSpace(b))
	}
	return nil
}
