package client

import (
	"os"
	"strings"
)

// DefaultEndpoints are the nodes of a local cluster (`make run`, `batond
// local`): FromEnv's endpoints when BATON_ENDPOINTS is unset or blank, as
// for the CLI and the Python and TypeScript SDKs.
var DefaultEndpoints = []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}

// ConfigFromEnv returns the Config that the CLI and the other SDKs build
// from the environment:
//
//	BATON_ENDPOINTS  comma-separated host:port or URLs (default DefaultEndpoints)
//	BATON_TOKEN      bearer token
//	BATON_CACERT     CA certificate (PEM) that signed the nodes' certificates
//	BATON_CERT       client certificate (PEM), with BATON_KEY its key
//
// An endpoint without a scheme is https when BATON_CACERT or BATON_CERT is
// set, http otherwise (see Config.Endpoints). The Config can be changed
// before it is given to New. BATON_TENANT is not read: every call names its
// tenant (pass os.Getenv("BATON_TENANT") where you want the CLI's).
func ConfigFromEnv() Config {
	cfg := Config{
		Token:    os.Getenv("BATON_TOKEN"),
		CAFile:   os.Getenv("BATON_CACERT"),
		CertFile: os.Getenv("BATON_CERT"),
		KeyFile:  os.Getenv("BATON_KEY"),
	}
	for _, ep := range strings.Split(os.Getenv("BATON_ENDPOINTS"), ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			cfg.Endpoints = append(cfg.Endpoints, ep)
		}
	}
	if len(cfg.Endpoints) == 0 {
		cfg.Endpoints = append([]string(nil), DefaultEndpoints...)
	}
	return cfg
}

// FromEnv is New(ConfigFromEnv()): a client of the cluster that the
// BATON_* variables printed by `batond local` (make run) describe.
func FromEnv() (*Client, error) {
	return New(ConfigFromEnv())
}
