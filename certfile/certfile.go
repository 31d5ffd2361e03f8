// Package certfile serves a TLS certificate from a pair of PEM files and takes a renewed pair
// without a restart: a renewal (certbot, cert-manager, an operator's copy) replaces the files, and
// the next handshakes present the new certificate. The files are looked at again at most once every
// checkInterval, by their size and modification time, so a busy server does not read them on
// every handshake; a pair that does not load (half written, or the key of another certificate)
// leaves the last good one in use.
package certfile

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// checkInterval is how often the files are looked at, at most.
const checkInterval = time.Second

// Reloader holds the certificate of a pair of files.
type Reloader struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	loaded    fileStamps // the files' stamps when cert was loaded
	refused   fileStamps // the stamps of the last pair that did not load, logged once
	checkedAt time.Time
}

// fileStamps tell one version of the pair from another.
type fileStamps struct{ cert, key stamp }

type stamp struct {
	size    int64
	modTime time.Time
}

// New loads the pair, and fails if it does not load: a server must not start without its
// certificate.
func New(certFile, keyFile string, logger *slog.Logger) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, logger: logger}
	stamps, err := r.stamps()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	r.cert, r.loaded, r.checkedAt = &cert, stamps, time.Now()
	return r, nil
}

// GetCertificate is tls.Config.GetCertificate: the pair's certificate, loaded again first if the
// files changed since it was.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checkedAt) >= checkInterval {
		r.checkedAt = now
		r.reloadLocked()
	}
	return r.cert, nil
}

// reloadLocked loads the pair again if its files changed, with r.mu held.
func (r *Reloader) reloadLocked() {
	stamps, err := r.stamps()
	if err != nil || stamps == r.loaded || stamps == r.refused {
		return // gone for a moment (a renewal that removes and writes) or unchanged: keep what is served
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.refused = stamps
		r.logger.Warn("the renewed TLS certificate does not load: still serving the last one", "cert", r.certFile, "key", r.keyFile, "error", err)
		return
	}
	r.cert, r.loaded = &cert, stamps
	var notAfter time.Time
	if cert.Leaf != nil { // nil only under GODEBUG=x509keypairleaf=0
		notAfter = cert.Leaf.NotAfter
	}
	r.logger.Info("TLS certificate loaded again", "cert", r.certFile, "not_after", notAfter)
}

func (r *Reloader) stamps() (fileStamps, error) {
	var s fileStamps
	for _, f := range []struct {
		name string
		to   *stamp
	}{{r.certFile, &s.cert}, {r.keyFile, &s.key}} {
		info, err := os.Stat(f.name)
		if err != nil {
			return fileStamps{}, fmt.Errorf("TLS: %w", err)
		}
		*f.to = stamp{info.Size(), info.ModTime()}
	}
	return s, nil
}
