// Package tlstest is a certificate authority for tests: it issues server certificates for loopback
// names, which clients of the test trust through the CA's pool or PEM file.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test's certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate in PEM, for clients that take a file (curl --cacert).
	File string
}

// New makes a CA whose certificate is written to a file in the test's temporary folder.
func New(t testing.TB) *CA {
	t.Helper()
	der, key := sign(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "usersd test CA"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}, nil, nil)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, File: filepath.Join(t.TempDir(), "ca.pem")}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Pool is a pool that holds the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Issue writes a server certificate for localhost and 127.0.0.1 and its key to certFile and
// keyFile (replacing them as a renewal does: written beside, then renamed), and returns the
// certificate's serial number.
func (ca *CA) Issue(t testing.TB, certFile, keyFile string) *big.Int {
	t.Helper()
	template := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, key := sign(t, template, ca.cert, ca.key)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	writePEM(t, certFile, "CERTIFICATE", der)
	return template.SerialNumber
}

// sign makes a key and a certificate of it from template, valid from an hour ago for a day, with a
// random serial, signed by parent's key (itself, when parent is nil); it returns the certificate's
// DER and the key.
func sign(t testing.TB, template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template.SerialNumber = serial(t)
	template.NotBefore, template.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// writePEM writes one PEM block to name through a file beside it and a rename, so that a reader
// never sees half of it.
func writePEM(t testing.TB, name, kind string, der []byte) {
	t.Helper()
	partial := name + ".partial"
	if err := os.WriteFile(partial, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(partial, name); err != nil {
		t.Fatal(err)
	}
}
