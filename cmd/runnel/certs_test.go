package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCertsCreate(t *testing.T, args ...string) string {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"certs", "create"}, args...))
	if err := root.Execute(); err != nil {
		t.Fatalf("certs create %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// The files make a working mTLS pair: node 1 serves, node 2 is its client,
// each verifies the other against ca.pem and the node name is in the SAN.
func TestCertsCreateMakesUsableMTLSCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	runCertsCreate(t, "--dir", dir, "--nodes", "2", "--hosts", "broker.example,10.1.2.3")

	for _, f := range []string{"ca-key.pem", "node-1-key.pem", "node-2-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", st.Mode().Perm())
	}

	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	load := func(id string) tls.Certificate {
		c, err := tls.LoadX509KeyPair(filepath.Join(dir, "node-"+id+".pem"), filepath.Join(dir, "node-"+id+"-key.pem"))
		if err != nil {
			t.Fatalf("node %s key pair: %v", id, err)
		}
		return c
	}
	n1, n2 := load("1"), load("2")
	leaf, err := x509.ParseCertificate(n1.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"runnel-node-1", "localhost", "127.0.0.1", "broker.example", "10.1.2.3"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("node 1 certificate not valid for %s: %v", name, err)
		}
	}
	if err := leaf.VerifyHostname("runnel-node-2"); err == nil {
		t.Error("node 1 certificate is valid for runnel-node-2")
	}

	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{n1}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			peer <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			peer <- "handshake: " + err.Error()
			return
		}
		_, _ = io.WriteString(tc, "ok")
		peer <- tc.ConnectionState().PeerCertificates[0].DNSNames[0]
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{
		RootCAs: pool, ServerName: "runnel-node-1", Certificates: []tls.Certificate{n2}, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatalf("mTLS dial: %v", err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatalf("read over mTLS: %v", err)
	}
	conn.Close()
	if got := <-peer; got != "runnel-node-2" {
		t.Fatalf("server saw client %q, want runnel-node-2", got)
	}
}

// A second run reuses the CA and keeps existing node files, so a cluster can
// grow; --force replaces node files but still keeps the CA.
func TestCertsCreateReusesCAAndKeepsNodes(t *testing.T) {
	dir := t.TempDir()
	runCertsCreate(t, "--dir", dir, "--nodes", "1")
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca, node1 := read("ca.pem"), read("node-1.pem")
	out := runCertsCreate(t, "--dir", dir, "--nodes", "3")
	if !strings.Contains(out, "using the existing CA") || !bytes.Equal(read("ca.pem"), ca) || !bytes.Equal(read("node-1.pem"), node1) {
		t.Fatalf("second run replaced the CA or node 1:\n%s", out)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	for _, id := range []string{"1", "2", "3"} {
		c, err := tls.LoadX509KeyPair(filepath.Join(dir, "node-"+id+".pem"), filepath.Join(dir, "node-"+id+"-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(c.Certificate[0])
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "runnel-node-" + id,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatalf("node %s: %v", id, err)
		}
	}
	runCertsCreate(t, "--dir", dir, "--nodes", "1", "--force")
	if bytes.Equal(read("node-1.pem"), node1) || !bytes.Equal(read("ca.pem"), ca) {
		t.Fatal("--force kept node 1 or replaced the CA")
	}
	// Half a CA is refused rather than silently replaced.
	os.Remove(filepath.Join(dir, "ca-key.pem"))
	root := newRootCommand()
	root.SetOut(io.Discard)
	root.SetArgs([]string{"certs", "create", "--dir", dir})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "only one of") {
		t.Fatalf("half a CA: %v", err)
	}
}
