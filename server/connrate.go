package server

import (
	"time"

	"github.com/runnel/runnel/internal/warnlimit"
	"github.com/runnel/runnel/server/connrate"
)

// DefaultMaxConnectionRatePerIP is the default of both doors' connection
// creation rate per client address (new connections per second; the burst
// is twice that): 0, off, as Kafka's max.connection.creation.rate is by
// default. 100 was tried: a test suite on 127.0.0.1 (the authorization
// matrix, a connection per case) went past it, and so would a busy proxy
// or NAT address; an exposed node sets it for its own clients.
const DefaultMaxConnectionRatePerIP = 0

// connRateAdmit returns the admission hook of one client door ("kafka",
// "http"): a token bucket per address at rate connections per second,
// refusals logged at most every 10 s. rate <= 0: nil (no limit).
func (s *Server) connRateAdmit(door string, rate int) func(string) bool {
	if rate <= 0 {
		return nil
	}
	lim := connrate.New(rate, 2*rate, connrate.DefaultMaxTracked)
	warn := warnlimit.New(s.logger, 10*time.Second)
	return func(ip string) bool {
		if lim.Allow(ip) {
			return true
		}
		warn.Warn("connection creation rate per address exceeded, refusing connection",
			"door", door, "remote", ip, "max_per_second", rate)
		return false
	}
}
