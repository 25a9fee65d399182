package api

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// HostCheck is middleware against DNS rebinding: a web page on
// attacker.example whose name is made to resolve to 127.0.0.1 reaches a node
// on localhost from the victim's browser, with "Host: attacker.example".
// Without authentication nothing else stops it reading or writing, so the
// request is refused (421 host-not-allowed) unless its Host names this node:
//
//   - an IP literal (a rebinding page always sends its own name, never an IP),
//   - localhost and *.localhost (browsers resolve them to loopback themselves),
//   - a name in allowed, exactly, or under a "*.suffix" pattern,
//   - no Host at all (HTTP/1.0 clients; browsers always send one).
//
// Names compare case-insensitively, without port or trailing dot. An allowed
// entry "*" turns the check off. trusted, when non-nil, exempts requests that
// arrived another way (forwarded by a node over the authenticated cluster
// port). It writes problem+json itself, so it can sit in front of anything.
func HostCheck(allowed []string, trusted func(*http.Request) bool, logger *slog.Logger) func(http.Handler) http.Handler {
	hosts := newHostSet(allowed)
	log := logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(next http.Handler) http.Handler {
		if hosts.any {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if (trusted != nil && trusted(r)) || hosts.allows(r.Host) {
				next.ServeHTTP(w, r)
				return
			}
			// Debug: a hostile page could otherwise fill the log.
			log.LogAttrs(r.Context(), slog.LevelDebug, "refused a request naming a host this node does not serve",
				slogString("host", r.Host), slogString("remote", r.RemoteAddr))
			WriteProblemLog(w, r, fmt.Errorf("%w: %q is not a name this node serves; use localhost, an IP address, or add the name to --http-allowed-hosts",
				ErrHostNotAllowed, hostName(r.Host)), log)
		})
	}
}

type hostSet struct {
	any      bool
	names    map[string]bool
	suffixes []string // ".example.net" for "*.example.net"
}

func newHostSet(allowed []string) hostSet {
	s := hostSet{names: map[string]bool{"localhost": true}, suffixes: []string{".localhost"}}
	for _, a := range allowed {
		a = strings.TrimSpace(a)
		switch {
		case a == "*":
			s.any = true
		case strings.HasPrefix(a, "*."):
			s.suffixes = append(s.suffixes, hostName(a[1:]))
		case a != "":
			s.names[hostName(a)] = true
		}
	}
	return s
}

func (s hostSet) allows(host string) bool {
	if host == "" {
		return true
	}
	name := hostName(host)
	if _, err := netip.ParseAddr(name); err == nil || s.names[name] {
		return true
	}
	for _, suf := range s.suffixes {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	return false
}

// hostName is host without port, IPv6 brackets or trailing dot, lower case.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
