package server

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

// Client TLS (HTTPS and the Kafka SSL listener) uses one certReloader: the
// node's certificate, key and optional client CA are read from files at start
// and again on SIGHUP or when the files change (checked every
// tlsReloadCheck), so certificates rotate without a restart. Handshakes in
// progress keep the certificate they started with; new ones get the new one.
// A reload that fails (half-written files, a key that does not match) keeps
// the previous material and logs why.
//
// Goroutine: one watcher, started by start and stopped by close.

// tlsReloadCheck is how often the files' contents are compared with what is
// loaded. Rotation tools (cert-manager, certbot) write files in place; SIGHUP
// applies a change at once.
const tlsReloadCheck = 5 * time.Second

// TLSFiles name the client-facing certificate material.
type TLSFiles struct {
	CertFile     string // PEM certificate chain
	KeyFile      string // PEM private key
	ClientCAFile string // PEM CAs whose client certificates are accepted (mTLS); empty: no client certificates
}

// Enabled reports whether a certificate is configured.
func (f TLSFiles) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" }

type tlsMaterial struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool
	digest    [32]byte // of the files' bytes, to notice changes
}

type certReloader struct {
	files TLSFiles
	log   *slog.Logger

	mu  sync.RWMutex
	cur *tlsMaterial // guarded by mu

	stop context.CancelFunc
	done chan struct{}
}

func newCertReloader(files TLSFiles, log *slog.Logger) (*certReloader, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("TLS needs both --tls-cert-file and --tls-key-file")
	}
	r := &certReloader{files: files, log: log}
	m, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur = m
	return r, nil
}

func (r *certReloader) load() (*tlsMaterial, error) {
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
func (r *certReloader) reload() (changed bool, err error) {
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

func (r *certReloader) material() *tlsMaterial {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cur
}

// serverConfig is the tls.Config of a client-facing listener; nextProtos
// are its ALPN protocols (h2 and http/1.1 for HTTPS, none for Kafka).
func (r *certReloader) serverConfig(nextProtos ...string) *tls.Config {
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

// start watches for SIGHUP and file changes until close.
func (r *certReloader) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	r.done = make(chan struct{})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer close(r.done)
		defer signal.Stop(hup)
		tick := time.NewTicker(tlsReloadCheck)
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

func (r *certReloader) close() {
	if r == nil || r.stop == nil {
		return
	}
	r.stop()
	<-r.done
}
