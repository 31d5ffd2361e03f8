package certfile

import (
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"usersd/internal/tlstest"
)

func serialOf(t *testing.T, r *Reloader) string {
	t.Helper()
	cert, err := r.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return cert.Leaf.SerialNumber.String()
}

// TestARenewedPairIsServedWithoutARestart: files replaced by a renewal are served within the check
// interval; a pair that does not load leaves the last good one in use; a missing or bad pair at
// the start is an error.
func TestARenewedPairIsServedWithoutARestart(t *testing.T) {
	ca := tlstest.New(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := ca.Issue(t, certFile, keyFile)
	r, err := New(certFile, keyFile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := serialOf(t, r); got != first.String() {
		t.Fatalf("serving serial %s, want the first certificate's %s", got, first)
	}

	renewed := ca.Issue(t, certFile, keyFile)
	deadline := time.Now().Add(5 * checkInterval)
	for serialOf(t, r) != renewed.String() {
		if time.Now().After(deadline) {
			t.Fatalf("still serving %s %s after the renewal, want %s", serialOf(t, r), 5*checkInterval, renewed)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A renewal half done: the new certificate without its key.
	other := filepath.Join(t.TempDir(), "other-key.pem")
	ca.Issue(t, certFile, other)
	time.Sleep(checkInterval + 100*time.Millisecond)
	if got := serialOf(t, r); got != renewed.String() {
		t.Fatalf("serving %s after a certificate whose key is not there, want the last good one %s", got, renewed)
	}

	if _, err := New(filepath.Join(dir, "missing.pem"), keyFile, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a missing certificate file loaded")
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.pem"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(filepath.Join(dir, "bad.pem"), keyFile, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a file that is not a certificate loaded")
	}
}
