package server_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// Issue 15's mode rule: --auth none (the default) is allowed only while
// every client listener is on loopback. A Kafka listener on every interface
// makes the node refuse to start, naming the two ways out; --allow-anonymous
// or --auth required starts it.
func TestAuthNoneRefusesReachableListener(t *testing.T) {
	_, port, _ := net.SplitHostPort(servertest.FreeAddr(t))
	n := servertest.New(t, servertest.Options{KafkaAddr: "0.0.0.0:" + port})
	n.StartNoWait()
	servertest.WaitFor(t, 30*time.Second, "the node to refuse to start", func() bool {
		return strings.Contains(n.Logs(), "refusing unauthenticated clients")
	})
	logs := n.Logs()
	for _, want := range []string{"--auth required", "--allow-anonymous", "--kafka-addr 0.0.0.0:" + port} {
		if !strings.Contains(logs, want) {
			t.Fatalf("refusal does not name %q:\n%s", want, logs)
		}
	}
}

func TestAuthNoneAllowAnonymousStarts(t *testing.T) {
	_, port, _ := net.SplitHostPort(servertest.FreeAddr(t))
	n := servertest.New(t, servertest.Options{KafkaAddr: "0.0.0.0:" + port, Args: []string{"--allow-anonymous"}})
	n.Start()
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "anon", "partitions": 1}, 201, nil)
}

func TestAuthRequiredReachableListenerStarts(t *testing.T) {
	_, port, _ := net.SplitHostPort(servertest.FreeAddr(t))
	n := servertest.New(t, servertest.Options{KafkaAddr: "0.0.0.0:" + port, Args: []string{"--auth", "required"}})
	n.Start()
}
