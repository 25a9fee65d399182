package server

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// The --auth mode rule (issue 15): `--auth none` lets every client do
// everything, which is safe only while no other machine can reach a client
// listener. A node whose HTTP, HTTPS, Kafka or Kafka SSL listener is on a
// non-loopback address therefore refuses to start under `--auth none`
// unless --allow-anonymous says anonymous access is wanted.

// ErrAnonymousReachable: Open refused `--auth none` on a listener other
// machines can reach.
var ErrAnonymousReachable = errors.New("refusing unauthenticated clients on a listener other machines can reach")

// CheckAuthMode applies the rule to c's client listeners (Open calls it;
// the deploy tests check every shipped configuration with it).
func (c Config) CheckAuthMode() error {
	if c.Auth.Mode == AuthRequired || c.Auth.AllowAnonymous {
		return nil
	}
	var open []string
	for _, l := range []struct{ flag, addr string }{
		{"--http-addr", c.HTTPAddr},
		{"--https-addr", c.HTTPSAddr},
		{"--kafka-addr", c.KafkaAddr},
		{"--kafka-tls-addr", c.KafkaTLSAddr},
	} {
		if l.addr != "" && !loopbackListenAddr(l.addr) {
			open = append(open, l.flag+" "+l.addr)
		}
	}
	if len(open) == 0 {
		return nil
	}
	return fmt.Errorf("%w (%s) with --auth none: "+
		"use --auth required (with --bootstrap-superuser to create the first user), "+
		"or bind the listeners to 127.0.0.1; --allow-anonymous runs without authentication "+
		"if every machine that reaches them is trusted", ErrAnonymousReachable, strings.Join(open, ", "))
}

// loopbackListenAddr: addr ("host:port") binds only a loopback interface.
// An empty host or an unspecified address binds every interface.
func loopbackListenAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
