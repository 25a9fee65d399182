package server_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// TestConnectionRatePerIP: with a creation rate of 5 connections per
// second per address (burst 10), connections opened fast from 127.0.0.1
// are refused on both doors (Kafka: closed at once; HTTP: 429
// connection-rate-exceeded problem+json with Retry-After), while the ones
// already open keep working; after a pause the address is admitted again.
func TestConnectionRatePerIP(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{
		"--kafka-max-connection-rate-per-ip", "5", "--http-max-connection-rate-per-ip", "5"}})
	http.DefaultClient.CloseIdleConnections()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()

	// Kafka door. Refused attempts take no token, so at most 200 attempts
	// see a refusal unless the node admits more than 5 per second.
	var kafkaOK net.Conn
	refused := false
	for range 200 {
		c, ok := kafkaAPIVersions(t, n.KafkaAddr)
		if !ok {
			refused = true
			break
		}
		held = append(held, c)
		kafkaOK = c
	}
	if !refused || kafkaOK == nil {
		t.Fatalf("200 Kafka connections opened fast with a rate of 5/s: refused=%v", refused)
	}
	if !apiVersionsOn(kafkaOK) {
		t.Fatal("a Kafka connection admitted before the refusals stopped working")
	}

	// HTTP door.
	var answer *http.Response
	for range 200 {
		c, err := net.Dial("tcp", n.HTTPAddr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if _, err := io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			continue // closed at once: refused before the answer was read
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			answer = resp
			break
		}
		resp.Body.Close()
	}
	if answer == nil {
		t.Fatal("200 HTTP connections opened fast with a rate of 5/s: no 429")
	}
	if answer.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", answer.Header)
	}
	if p := rawProblem(t, answer); !strings.HasSuffix(p.Type, "connection-rate-exceeded") {
		t.Fatalf("problem %+v", p)
	}

	// Recovery: the buckets refill at 5 per second.
	servertest.WaitFor(t, 30*time.Second, "a Kafka connection admitted again", func() bool {
		c, ok := kafkaAPIVersions(t, n.KafkaAddr)
		if ok {
			c.Close()
		}
		return ok
	})
	servertest.WaitFor(t, 30*time.Second, "an HTTP connection admitted again", func() bool {
		resp, err := http.Get(n.URL + "/livez")
		if err != nil {
			return false
		}
		resp.Body.Close()
		http.DefaultClient.CloseIdleConnections()
		return resp.StatusCode == http.StatusOK
	})
}

// kafkaAPIVersions dials addr and sends ApiVersions v0; ok is false when
// the node closed the connection instead of answering.
func kafkaAPIVersions(t *testing.T, addr string) (net.Conn, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if !apiVersionsOn(c) {
		c.Close()
		return nil, false
	}
	return c, true
}

// apiVersionsOn sends one ApiVersions v0 request on c and reads the answer.
func apiVersionsOn(c net.Conn) bool {
	// size, api key 18, version 0, correlation id 7, null client id.
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(req); err != nil {
		return false
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return false
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	if binary.BigEndian.Uint32(hdr[4:]) != 7 || size < 4 || size > 1<<20 {
		return false
	}
	_, err := io.CopyN(io.Discard, c, int64(size-4))
	return err == nil
}
