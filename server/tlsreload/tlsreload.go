// Package tlsreload is the client-facing certificate of a node (HTTPS and
// the Kafka SSL listener), reloaded without a restart.
//
// Client TLS uses one Reloader: the node's certificate, key and optional
// client CA are read from files at start and again on SIGHUP or when the
// files change (checked every reloadCheck), so certificates rotate without
// a restart. Handshakes in progress keep the certificate they started
// with; new ones get the new one. A reload that fails (half-written
// files, a key that does not match) keeps the previous material and logs
// why.
//
// Goroutines: one watcher, started by Start and stopped by Close.
// Lock order: Reloader.mu is a leaf (held only to swap the material).
// It imports no other runnel package.
package tlsreload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// reloadCheck is how often the files' contents are compared with what is
// loaded. Rotation tools (cert-manager, certbot) write files in place; SIGHUP
// applies a change at once.
const reloadCheck = 5 * time.Second

// Files name the client-facing certificate material.
type Files struct {
	CertFile     string // PEM certificate chain
	KeyFile      string // PEM private key
	ClientCAFile string // PEM CAs whose client certificates are accepted (mTLS); empty: no client certificates
}

// Enabled reports whether a certificate is configured.
func (f Files) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" }

type tlsMaterial struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool
	digest    [32]byte // of the files' bytes, to notice changes
}

// Reloader serves the current certificate to new handshakes. Safe for
// concurrent use.
type Reloader struct {
	files Files
	log   *slog.Logger

	mu  sync.RWMutex
	cur *tlsMaterial // guarded by mu

	stop context.CancelFunc
	done chan struct{}
}

// New loads the files once; Start watches them.
func New(files Files, log *slog.Logger) (*Reloader, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("TLS needs both --tls-cert-file and --tls-key-file")
	}
	r := &Reloader{files: files, log: log}
	m, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur = m
	return r, nil
}

func (r *Reloader) load() (*tlsMaterial, error) {
	certPEM, err := os.ReadFile(r.files.CertFile)
	if err != nil {
		return nil, fmt.Errorf("read TLS certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(r.files.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("read TLS key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load TLS key pair %s, %s: %w", r.files.CertFile, r.files.KeyFile, err)
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write(keyPEM)
	m := &tlsMaterial{cert: &cert}
	if r.files.ClientCAFile != "" {
		caPEM, err := os.ReadFile(r.files.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("read TLS client CA: %w", err)
		}
		m.clientCAs = x509.NewCertPool()
		if !m.clientCAs.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("TLS client CA file %s holds no PEM certificate", r.files.ClientCAFile)
		}
		h.Write(caPEM)
	}
	copy(m.digest[:], h.Sum(nil))
	return m, nil
}

// reload reads the files again; changed reports whether new material is in use.
func (r *Reloader) reload() (changed bool, err error) {
	m, err := r.load()
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if bytes.Equal(m.digest[:], r.cur.digest[:]) {
		return false, nil
	}
	r.cur = m
	return true, nil
}

func (r *Reloader) material() *tlsMaterial {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cur
}

// ServerConfig is the tls.Config of a client-facing listener; nextProtos
// are its ALPN protocols (h2 and http/1.1 for HTTPS, none for Kafka).
func (r *Reloader) ServerConfig(nextProtos ...string) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := r.material()
		c := base.Clone()
		c.GetConfigForClient = nil
		c.Certificates = []tls.Certificate{*m.cert}
		if m.clientCAs != nil {
			c.ClientCAs = m.clientCAs
			c.ClientAuth = tls.RequireAndVerifyClientCert
		}
		return c, nil
	}
	return base
}

// Start watches for SIGHUP and file changes until Close.
func (r *Reloader) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	r.done = make(chan struct{})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer close(r.done)
		defer signal.Stop(hup)
		tick := time.NewTicker(reloadCheck)
		defer tick.Stop()
		for {
			why := "file change"
			select {
			case <-ctx.Done():
				return
			case <-hup:
				why = "SIGHUP"
			case <-tick.C:
			}
			changed, err := r.reload()
			switch {
			case err != nil:
				r.log.Warn("TLS certificate reload failed; keeping the current one", "trigger", why, "err", err)
			case changed:
				r.log.Info("TLS certificate reloaded", "trigger", why, "cert", r.files.CertFile)
			}
		}
	}()
}

// Close stops the watcher; a nil Reloader is a no-op.
func (r *Reloader) Close() {
	if r == nil || r.stop == nil {
		return
	}
	r.stop()
	<-r.done
}
