package server_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// makeCerts runs `runnel certs create` (the real command users run) into a
// fresh directory and returns it.
func makeCerts(t testing.TB, nodes string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	out, err := exec.Command(servertest.Binary(t), "certs", "create", "--dir", dir, "--nodes", nodes).CombinedOutput()
	if err != nil {
		t.Fatalf("runnel certs create: %v\n%s", err, out)
	}
	return dir
}

func caPool(t testing.TB, dir string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s/ca.pem holds no certificate", dir)
	}
	return pool
}

func keyPair(t *testing.T, dir, id string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(filepath.Join(dir, "node-"+id+".pem"), filepath.Join(dir, "node-"+id+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func httpsClient(roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}}
}

func startTLSNode(t testing.TB, certs string, extra ...string) (*servertest.Node, string) {
	t.Helper()
	httpsAddr := servertest.FreeAddr(t)
	args := append([]string{"--https-addr", httpsAddr,
		"--tls-cert-file", filepath.Join(certs, "node-1.pem"),
		"--tls-key-file", filepath.Join(certs, "node-1-key.pem")}, extra...)
	n := servertest.Start(t, servertest.Options{Args: args})
	_, port, _ := strings.Cut(httpsAddr, ":")
	return n, "https://localhost:" + port
}

// HTTPS serves the same API as HTTP, over HTTP/2 and HTTP/1.1, with the
// certificate `runnel certs create` made; curl and the CLI use it with the CA.
func TestHTTPSServesTheAPI(t *testing.T) {
	certs := makeCerts(t, "1")
	_, base := startTLSNode(t, certs)
	c := httpsClient(caPool(t, certs))

	resp, err := c.Post(base+"/v1/topics", "application/json", strings.NewReader(`{"name":"secure","partitions":1}`))
	if err != nil {
		t.Fatalf("create over HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.ProtoMajor != 2 {
		t.Fatalf("create over HTTPS: %d over %s, want 201 over HTTP/2", resp.StatusCode, resp.Proto)
	}
	resp, err = c.Post(base+"/v1/topics/secure/records", "application/json", strings.NewReader(`{"records":[{"value":{"n":1}}]}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("produce over HTTPS: %v %v", err, resp)
	}
	resp.Body.Close()

	// HTTP/1.1 clients are served too.
	h1 := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: caPool(t, certs), NextProtos: []string{"http/1.1"}},
	}}
	resp, err = h1.Get(base + "/v1/topics/secure/partitions/0/records?offset=earliest")
	if err != nil {
		t.Fatalf("consume over HTTPS/1.1: %v", err)
	}
	var got struct {
		Records []struct {
			Value json.RawMessage `json:"value"`
		} `json:"records"`
	}
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || resp.ProtoMajor != 1 || len(got.Records) != 1 || string(got.Records[0].Value) != `{"n":1}` {
		t.Fatalf("consume over %s: %v %+v", resp.Proto, err, got)
	}

	// A client that does not trust the CA is refused by its own TLS stack.
	if _, err := httpsClient(x509.NewCertPool()).Get(base + "/livez"); err == nil {
		t.Fatal("a client without the CA connected")
	}

	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Log("curl not installed: the curl --cacert check is skipped")
		return
	}
	out, err := exec.Command(curl, "-sS", "--fail", "--cacert", filepath.Join(certs, "ca.pem"), base+"/v1/topics/secure").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(`"name":"secure"`)) {
		t.Fatalf("curl --cacert: %v\n%s", err, out)
	}
}

// With --tls-client-ca-file a client must present a certificate from that
// CA: one is accepted, none or another CA's is refused.
func TestHTTPSMutualTLS(t *testing.T) {
	certs := makeCerts(t, "2")
	other := makeCerts(t, "1")
	_, base := startTLSNode(t, certs, "--tls-client-ca-file", filepath.Join(certs, "ca.pem"))
	roots := caPool(t, certs)

	resp, err := httpsClient(roots, keyPair(t, certs, "2")).Get(base + "/v1/cluster")
	if err != nil {
		t.Fatalf("client with a certificate from the CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("client with a certificate from the CA: %d", resp.StatusCode)
	}
	if _, err := httpsClient(roots).Get(base + "/v1/cluster"); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if _, err := httpsClient(roots, keyPair(t, other, "1")).Get(base + "/v1/cluster"); err == nil {
		t.Fatal("a client with another CA's certificate was served")
	}
}

// Rotating the certificate files and sending SIGHUP changes what new
// handshakes get, while a connection opened before keeps working.
func TestHTTPSCertificateRotation(t *testing.T) {
	certs := makeCerts(t, "1")
	n, base := startTLSNode(t, certs)
	oldClient := httpsClient(caPool(t, certs))
	get := func(c *http.Client) error {
		resp, err := c.Get(base + "/v1/cluster")
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	}
	if err := get(oldClient); err != nil {
		t.Fatalf("before rotation: %v", err)
	}

	next := makeCerts(t, "1") // a new CA, as after a compromise
	for _, f := range []string{"node-1.pem", "node-1-key.pem"} {
		b, err := os.ReadFile(filepath.Join(next, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(certs, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n.Signal(syscall.SIGHUP)
	newClient := httpsClient(caPool(t, next))
	servertest.WaitFor(t, 30*time.Second, "new handshakes to get the rotated certificate", func() bool {
		newClient.CloseIdleConnections()
		return get(newClient) == nil
	})
	// The connection made before the rotation is still open and usable.
	if err := get(oldClient); err != nil {
		t.Fatalf("the connection opened before the rotation broke: %v", err)
	}
	// A new connection that trusts only the old CA is refused now.
	fresh := httpsClient(caPool(t, certs))
	if err := get(fresh); err == nil {
		t.Fatal("a new handshake still got the old certificate")
	}
	if !strings.Contains(n.Logs(), "TLS certificate reloaded") {
		t.Fatalf("no reload logged:\n%s", n.Logs())
	}
}

// The CLI reaches an HTTPS node with --ca-file (or RUNNEL_CA_FILE).
func TestCLIOverHTTPS(t *testing.T) {
	certs := makeCerts(t, "1")
	_, base := startTLSNode(t, certs)
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(servertest.Binary(t), append([]string{"--server", base}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	ca := filepath.Join(certs, "ca.pem")
	if out, err := run(nil, "--ca-file", ca, "topic", "create", "cli-tls", "-p", "2"); err != nil {
		t.Fatalf("topic create over HTTPS: %v\n%s", err, out)
	}
	out, err := run([]string{"RUNNEL_CA_FILE=" + ca}, "topic", "list", "-o", "json")
	if err != nil || !strings.Contains(out, `"cli-tls"`) {
		t.Fatalf("topic list over HTTPS with RUNNEL_CA_FILE: %v\n%s", err, out)
	}
	if out, err := run(nil, "topic", "list"); err == nil {
		t.Fatalf("the CLI trusted an unknown CA without --ca-file:\n%s", out)
	}
}

// The web UI works over HTTPS (HTTP/2): the cluster page loads and shows
// the node's cluster id, fetched by the page's own script over TLS. The
// browser is told to accept the private CA's certificate (the chain itself
// is checked by TestHTTPSServesTheAPI).
func TestUIOverHTTPS(t *testing.T) {
	certs := makeCerts(t, "1")
	node, base := startTLSNode(t, certs)
	var cluster api.Cluster
	uiHTTP(t, "GET", node.URL+"/v1/cluster", nil, &cluster)
	ctx := uiBrowser(t, chromedp.Flag("ignore-certificate-errors", true))
	uiDo(t, ctx, "open the cluster page over HTTPS", chromedp.Navigate(base+"/ui/#/cluster"))
	uiWait(t, ctx, "cluster id over HTTPS", fmt.Sprintf(`location.protocol === 'https:' && document.querySelector('[data-test=cluster-id]')?.textContent === %q`, cluster.ClusterID))
}
