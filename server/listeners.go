// The client-facing listeners: the HTTP and HTTPS ports with their
// certificate, the inter-broker peers handed over by the port mux, and
// the profiler (--pprof).

package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/runnel/runnel/server/tlsreload"
)

// acceptPeer reads an inter-broker connection's hello and hands it to the
// Kafka listener's peer door.
func (s *Server) acceptPeer(c net.Conn) {
	pc, err := readPeerHello(c)
	if err != nil {
		s.peerRefused.Warn("inter-broker connection refused", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	s.interBroker.hand(pc)
}

// openTLS loads the client-facing certificate (--tls-*-file) when one is
// configured and starts watching it for rotation.
func (s *Server) openTLS() error {
	if !s.cfg.TLS.Enabled() {
		if s.cfg.TLS.ClientCAFile != "" {
			return errors.New("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
		}
		if s.cfg.HTTPSAddr != "" {
			return errors.New("--https-addr needs --tls-cert-file and --tls-key-file")
		}
		return nil
	}
	r, err := tlsreload.New(s.cfg.TLS, s.logger.With("component", "tls"))
	if err != nil {
		return err
	}
	r.Start()
	s.tls = r
	return nil
}

// listenHTTP opens the plaintext (--http-addr) and TLS (--https-addr)
// listeners of the HTTP API; either may be off, not both.
func (s *Server) listenHTTP() (plain, secure net.Listener, err error) {
	if s.cfg.HTTPAddr == "" && s.cfg.HTTPSAddr == "" {
		return nil, nil, errors.New("no HTTP listener: set --http-addr, --https-addr or both")
	}
	if s.cfg.HTTPAddr != "" {
		if plain, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
			return nil, nil, fmt.Errorf("listen HTTP on %s: %w", s.cfg.HTTPAddr, err)
		}
	}
	if s.cfg.HTTPSAddr != "" {
		if secure, err = net.Listen("tcp", s.cfg.HTTPSAddr); err != nil {
			closeListeners(plain)
			return nil, nil, fmt.Errorf("listen HTTPS on %s: %w", s.cfg.HTTPSAddr, err)
		}
	}
	return plain, secure, nil
}

func closeListeners(lns ...net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}

// withPprof serves Go's profiler under /debug/pprof/ (--pprof).
func withPprof(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", next)
	return mux
}
