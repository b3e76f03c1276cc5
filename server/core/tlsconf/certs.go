package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority that signs node certificates.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// Validity of what NewCA and Issue make.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	NodeValidity = 2 * 365 * 24 * time.Hour
)

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// NewCA makes a self-signed ECDSA P-256 CA.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Baton"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return caFrom(der, key)
}

func caFrom(der []byte, key *ecdsa.PrivateKey) (*CA, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}, nil
}

// LoadCA reads a CA certificate and its ECDSA key (PEM; SEC 1 or PKCS #8).
func LoadCA(certFile, keyFile string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("CA: the key is not an ECDSA key")
	}
	ca, err := caFrom(pair.Certificate[0], key)
	if err != nil {
		return nil, err
	}
	if !ca.Cert.IsCA {
		return nil, fmt.Errorf("CA: %s is not a CA certificate", certFile)
	}
	return ca, nil
}

// Issue makes a node certificate for name, valid as a TLS server for hosts
// (IP addresses and DNS names) and as a TLS client, signed by the CA.
func (ca *CA) Issue(name string, hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"Baton"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(NodeValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// WriteNew writes a file that must not exist yet (O_EXCL), with perm.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Files are the paths of a node's certificate files under a directory.
type Files struct{ CA, Cert, Key string }

// NodeFiles names node's files in dir: ca.pem, NODE.pem, NODE-key.pem.
func NodeFiles(dir, node string) Files {
	return Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, node+".pem"),
		Key: filepath.Join(dir, node+"-key.pem")}
}

// CAFiles names the CA's certificate and key in dir.
func CAFiles(dir string) (cert, key string) {
	return filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
}

// Generate writes into dir (created 0700 if absent) a CA unless ca is
// given (then only its certificate, as ca.pem, unless that file is already
// there and equal), and one certificate and key per node, each valid for
// hosts plus the node's own name. It refuses to overwrite any file, and
// checks that none exists before writing the first. Keys are 0600.
func Generate(dir string, ca *CA, nodes, hosts []string) (*CA, error) {
	if len(nodes) == 0 {
		return nil, errors.New("no nodes")
	}
	caCert, caKey := CAFiles(dir)
	writeCA := ca == nil
	var check []string
	if writeCA {
		check = append(check, caCert, caKey)
	} else if b, err := os.ReadFile(caCert); err == nil {
		if string(b) != string(ca.CertPEM) {
			return nil, fmt.Errorf("%s exists and is another certificate", caCert)
		}
	} else {
		check = append(check, caCert)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if n == "" || n == "ca" || n == "ca-key" || filepath.Base(n) != n || seen[n] {
			return nil, fmt.Errorf("node name %q: empty, reserved, a path or repeated", n)
		}
		seen[n] = true
		f := NodeFiles(dir, n)
		check = append(check, f.Cert, f.Key)
	}
	for _, p := range check {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("%s exists; refusing to overwrite it", p)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if ca == nil {
		var err error
		if ca, err = NewCA("Baton cluster CA"); err != nil {
			return nil, err
		}
		if err := WriteNew(caKey, ca.KeyPEM, 0o600); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(caCert); err != nil {
		if err := WriteNew(caCert, ca.CertPEM, 0o644); err != nil {
			return nil, err
		}
	}
	for _, n := range nodes {
		certPEM, keyPEM, err := ca.Issue(n, append(append([]string{}, hosts...), n))
		if err != nil {
			return nil, err
		}
		f := NodeFiles(dir, n)
		if err := WriteNew(f.Key, keyPEM, 0o600); err != nil {
			return nil, err
		}
		if err := WriteNew(f.Cert, certPEM, 0o644); err != nil {
			return nil, err
		}
	}
	return ca, nil
}
