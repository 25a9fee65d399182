package httpdoor

import (
	"context"
	"net"
	"net/http"
	"os"
)

// The Host check (api.HostCheck, against DNS rebinding) guards the public
// HTTP listener. Requests forwarded by other nodes arrive over the cluster
// port, authenticated by the cluster secret and naming "runnel-node-<id>":
// they are exempt, and so are HTTPS requests (see hostCheckExempt).

type interNodeKey struct{}

// BaseContext (an http.Server's) marks requests that arrived on the
// inter-node listener interLn; every request's context derives from reqCtx.
func BaseContext(reqCtx context.Context, interLn net.Listener) func(net.Listener) context.Context {
	inter := context.WithValue(reqCtx, interNodeKey{}, true)
	return func(l net.Listener) context.Context {
		if l == interLn {
			return inter
		}
		return reqCtx
	}
}

// HostCheckExempt: requests forwarded by other nodes, and HTTPS requests (a
// browser only completes TLS with a certificate valid for the name it
// asked for, which a rebinding page's name is not).
func HostCheckExempt(r *http.Request) bool {
	v, _ := r.Context().Value(interNodeKey{}).(bool)
	return v || r.TLS != nil
}

// AllowedHosts is --http-allowed-hosts (allowed) plus the names this node
// knows for itself: its hostname and the host of its advertised HTTP
// address adv (localhost and IP literals are always allowed by
// api.HostCheck).
func AllowedHosts(allowed []string, adv string) []string {
	hosts := append([]string(nil), allowed...)
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts = append(hosts, name)
	}
	if adv != "" {
		if host, _, err := net.SplitHostPort(adv); err == nil {
			hosts = append(hosts, host)
		}
	}
	return hosts
}

// ClientAddr is the client a request's per-client HTTP limits count
// under: none for requests other nodes forward (they count node-wide, not
// against the forwarding node's address), else the remote host.
func ClientAddr(r *http.Request) string {
	if v, _ := r.Context().Value(interNodeKey{}).(bool); v {
		return ""
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
