package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/baton-dev/baton/server/core/tlsconf"
)

const certsUsageText = `batond certs: make a CA and node certificates for a Baton cluster.

Usage:
  batond certs --out DIR --nodes n1,n2,n3 [--hosts 10.0.0.1,baton-1.example] \
               [--ca-cert ca.pem --ca-key ca-key.pem | --ca-key-out KEYDIR] [--if-absent]

Writes into DIR (created 0700): ca.pem and ca-key.pem (a new ECDSA P-256 CA,
unless --ca-cert/--ca-key name an existing one), and per node NODE.pem and
NODE-key.pem, valid as server and client certificate for the --hosts (IP
addresses and DNS names; default 127.0.0.1 and localhost) and the node's own
name. Keys are written 0600. Existing files are never overwritten.
--ca-key-out writes a new CA's key into another directory (one the nodes
never see). --if-absent makes a run that finds every file already there
succeed without writing anything (a one-shot job run on every start); a
run that finds only some of them still fails.

Each node then runs with:
  --tls-cert-file DIR/NODE.pem --tls-key-file DIR/NODE-key.pem
  --peer-cert-file DIR/NODE.pem --peer-key-file DIR/NODE-key.pem --peer-ca-file DIR/ca.pem
and clients trust DIR/ca.pem (baton --cacert, BATON_CACERT). Keep
ca-key.pem off the nodes: whoever holds it can join the cluster. A node's
certificate must name every address its peers and clients reach it by.

Flags:
`

func runCerts(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("batond certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, certsUsageText); fs.PrintDefaults() }
	out := fs.String("out", "", "directory to write into (required)")
	nodes := fs.String("nodes", "", "comma-separated node ids to make certificates for (required), e.g. n1,n2,n3")
	hosts := fs.String("hosts", "127.0.0.1,localhost", "comma-separated IP addresses and DNS names every node certificate is valid for (the node's id is added)")
	caCert := fs.String("ca-cert", "", "sign with this existing CA certificate (PEM) instead of making a new CA")
	caKey := fs.String("ca-key", "", "the key of --ca-cert (PEM, ECDSA)")
	caKeyOut := fs.String("ca-key-out", "", "write a new CA's key into this directory instead of --out (created 0700)")
	ifAbsent := fs.Bool("if-absent", false, "succeed without writing when every file is already there")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(msg string) int {
		fmt.Fprintln(stderr, "batond certs:", msg, "(see --help)")
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case *out == "":
		return usage("--out is required")
	case split(*nodes) == nil:
		return usage("--nodes is required")
	case (*caCert == "") != (*caKey == ""):
		return usage("give both --ca-cert and --ca-key, or neither")
	case *caKeyOut != "" && *caCert != "":
		return usage("--ca-key-out is for a new CA; --ca-cert/--ca-key name an existing one")
	}
	if *ifAbsent {
		present, missing := certFilesPresent(*out, *caKeyOut, *caCert != "", split(*nodes))
		if missing == 0 {
			fmt.Fprintf(stdout, "every certificate is already in %s; nothing written\n", *out)
			return 0
		}
		if present > 0 {
			fmt.Fprintf(stderr, "batond certs: %s holds %d of the files and lacks %d; refusing to mix CAs (remove them, or make the missing ones with --ca-cert/--ca-key)\n",
				*out, present, missing)
			return 1
		}
	}
	var ca *tlsconf.CA
	if *caCert != "" {
		var err error
		if ca, err = tlsconf.LoadCA(*caCert, *caKey); err != nil {
			fmt.Fprintln(stderr, "batond certs:", err)
			return 1
		}
	}
	if *caKeyOut != "" {
		var err error
		if ca, err = newCAKeyElsewhere(*out, *caKeyOut); err != nil {
			fmt.Fprintln(stderr, "batond certs:", err)
			return 1
		}
	}
	if _, err := tlsconf.Generate(*out, ca, split(*nodes), split(*hosts)); err != nil {
		fmt.Fprintln(stderr, "batond certs:", err)
		return 1
	}
	caFile, caKeyFile := tlsconf.CAFiles(*out)
	switch {
	case *caKeyOut != "":
		_, caKeyFile = tlsconf.CAFiles(*caKeyOut)
		fmt.Fprintf(stdout, "CA:    %s (key %s: keep it off the nodes)\n", caFile, caKeyFile)
	case ca == nil:
		fmt.Fprintf(stdout, "CA:    %s (key %s: keep it off the nodes)\n", caFile, caKeyFile)
	default:
		fmt.Fprintf(stdout, "CA:    %s (signed with %s)\n", caFile, *caCert)
	}
	for _, n := range split(*nodes) {
		f := tlsconf.NodeFiles(*out, n)
		fmt.Fprintf(stdout, "%-6s %s, %s\n", n+":", f.Cert, f.Key)
	}
	return 0
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// certFilesPresent counts which of the files a run would write exist.
func certFilesPresent(out, caKeyOut string, existingCA bool, nodes []string) (present, missing int) {
	caCert, caKey := tlsconf.CAFiles(out)
	if caKeyOut != "" {
		_, caKey = tlsconf.CAFiles(caKeyOut)
	}
	files := []string{caCert}
	if !existingCA {
		files = append(files, caKey)
	}
	for _, n := range nodes {
		f := tlsconf.NodeFiles(out, n)
		files = append(files, f.Cert, f.Key)
	}
	for _, f := range files {
		if _, err := os.Lstat(f); err == nil {
			present++
		} else {
			missing++
		}
	}
	return present, missing
}

// newCAKeyElsewhere makes a new CA whose key goes to keyDir, not to out
// (where Generate then writes its certificate and the nodes').
func newCAKeyElsewhere(out, keyDir string) (*tlsconf.CA, error) {
	caCert, _ := tlsconf.CAFiles(out)
	_, caKey := tlsconf.CAFiles(keyDir)
	for _, p := range []string{caCert, caKey} {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("%s exists; refusing to overwrite it", p)
		}
	}
	ca, err := tlsconf.NewCA("Baton cluster CA")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		return nil, err
	}
	if err := tlsconf.WriteNew(caKey, ca.KeyPEM, 0o600); err != nil {
		return nil, err
	}
	return ca, nil
}
