package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/servertest"
)

// startKafkaTLSNode runs a node with both Kafka listeners: plaintext on
// n.KafkaAddr and SSL on the returned address.
func startKafkaTLSNode(t testing.TB, certs string, extra ...string) (*servertest.Node, string) {
	t.Helper()
	sslAddr := servertest.FreeAddr(t)
	args := append([]string{"--kafka-tls-addr", sslAddr,
		"--tls-cert-file", filepath.Join(certs, "node-1.pem"),
		"--tls-key-file", filepath.Join(certs, "node-1-key.pem")}, extra...)
	return servertest.Start(t, servertest.Options{Args: args}), sslAddr
}

func brokerPorts(t *testing.T, cl *kgo.Client) []int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	var ports []int32
	for _, b := range resp.Brokers {
		ports = append(ports, b.Port)
	}
	return ports
}

// franz-go and sarama produce and consume over the SSL listener; a client
// is given the brokers' endpoints of the listener it connected to.
func TestKafkaTLSClients(t *testing.T) {
	certs := makeCerts(t, "1")
	n, sslAddr := startKafkaTLSNode(t, certs)
	tlsCfg := &tls.Config{RootCAs: caPool(t, certs), MinVersion: tls.VersionTLS12}
	httpCreateTopic(t, n, "tls-franz", 3)

	cl, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(tlsCfg.Clone()),
		kgo.ConsumeTopics("tls-franz"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, sslPort, _ := strings.Cut(sslAddr, ":")
	_, plainPort, _ := strings.Cut(n.KafkaAddr, ":")
	if got := brokerPorts(t, cl); len(got) != 1 || fmt.Sprint(got[0]) != sslPort {
		t.Fatalf("SSL client was given broker ports %v, want [%s]", got, sslPort)
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if got := brokerPorts(t, plain); len(got) != 1 || fmt.Sprint(got[0]) != plainPort {
		t.Fatalf("plaintext client was given broker ports %v, want [%s]", got, plainPort)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const records = 2000
	for i := range records {
		cl.Produce(ctx, &kgo.Record{Topic: "tls-franz", Key: []byte(e2eKey(i)), Value: []byte(e2eValue(i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("produce over SSL: %v", err)
	}
	seen := 0
	for seen < records {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume over SSL after %d records: %v", seen, err)
		}
		seen += fs.NumRecords()
	}

	// sarama, the other Go client, over SSL.
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Net.TLS.Enable = true
	cfg.Net.TLS.Config = tlsCfg.Clone()
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	prod, err := sarama.NewSyncProducer([]string{sslAddr}, cfg)
	if err != nil {
		t.Fatalf("sarama over SSL: %v", err)
	}
	part, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "tls-franz", Key: sarama.StringEncoder("s"), Value: sarama.StringEncoder("sarama-ssl")})
	prod.Close()
	if err != nil {
		t.Fatalf("sarama produce over SSL: %v", err)
	}
	cons, err := sarama.NewConsumer([]string{sslAddr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("tls-franz", part, off)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		if string(m.Value) != "sarama-ssl" {
			t.Fatalf("sarama read %q", m.Value)
		}
	case err := <-pc.Errors():
		t.Fatalf("sarama consume over SSL: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("sarama consume over SSL timed out")
	}

	if _, err := exec.LookPath("kcat"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat not installed")
		}
		t.Log("kcat not installed: the kcat SSL check is skipped")
		return
	}
	ssl := []string{"-b", sslAddr, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + filepath.Join(certs, "ca.pem")}
	kcat(t, strings.NewReader("k1\tkcat-ssl\n"), append(ssl, "-P", "-t", "tls-franz", "-p", "0", "-K", "\t")...)
	out := kcat(t, nil, append(ssl, "-C", "-t", "tls-franz", "-p", "0", "-o", "-1", "-e", "-q", "-f", "%k=%s\n")...)
	if !bytes.Contains(out, []byte("k1=kcat-ssl")) {
		t.Fatalf("kcat over SSL read %q", out)
	}
}

// With --tls-client-ca-file the SSL listener takes only clients with a
// certificate from that CA.
func TestKafkaMutualTLS(t *testing.T) {
	certs := makeCerts(t, "2")
	_, sslAddr := startKafkaTLSNode(t, certs, "--tls-client-ca-file", filepath.Join(certs, "ca.pem"))
	roots := caPool(t, certs)
	ping := func(certs ...tls.Certificate) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.RequestRetries(0),
			kgo.DialTLSConfig(&tls.Config{RootCAs: roots, Certificates: certs}))
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := ping(keyPair(t, certs, "2")); err != nil {
		t.Fatalf("client with a certificate from the CA: %v", err)
	}
	if err := ping(); err == nil {
		t.Fatal("a client without a certificate was served")
	}
}

// kafkajs (Node's TLS stack) over the SSL listener.
func TestKafkaTLSKafkajs(t *testing.T) {
	dir := filepath.Join("testdata", "kafkajs")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err != nil {
		servertest.MissingTool(t, fmt.Sprintf("kafkajs not installed (npm ci in %s): %v", dir, err))
	}
	certs := makeCerts(t, "1")
	_, sslAddr := startKafkaTLSNode(t, certs)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "roundtrip.js", sslAddr, "kafkajs-tls", "2000")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KAFKAJS_NO_PARTITIONER_WARNING=1", "RUNNEL_KAFKAJS_CA="+filepath.Join(certs, "ca.pem"))
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(`"read":2000`)) {
		t.Fatalf("kafkajs over SSL: %v\n%s", err, out)
	}
}

// BenchmarkKafkaTLS: franz-go produce and consume with 1 KiB records over the
// SSL listener against the plaintext one of the same node, in the same run.
// Metric ratio = TLS records/s over plaintext records/s (consume over TLS has
// no sendfile). Needs RUNNEL_BENCH=1 (it starts a server).
func BenchmarkKafkaTLS(b *testing.B) {
	if os.Getenv("RUNNEL_BENCH") != "1" {
		b.Skip("set RUNNEL_BENCH=1 to run")
	}
	certs := makeCerts(b, "1")
	node, sslAddr := startKafkaTLSNode(b, certs)
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: caPool(b, certs), MinVersion: tls.VersionTLS12})
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(rand.Uint32())
	}
	runs := 0
	report := func(b *testing.B, records int, tlsTime, plain time.Duration) {
		b.ReportMetric(float64(records)/tlsTime.Seconds(), "tls-records/s")
		b.ReportMetric(float64(records)/plain.Seconds(), "plaintext-records/s")
		b.ReportMetric(plain.Seconds()/tlsTime.Seconds(), "ratio")
	}
	b.Run("produce", func(b *testing.B) {
		runs++
		const perOp = 20_000
		topic := fmt.Sprintf("bench-tls-produce-%d", runs)
		runnelTopic(b, node, topic, 3)
		b.SetBytes(perOp * int64(len(value)))
		var secure, plain time.Duration
		for range b.N {
			plain += benchProduce(b, node.KafkaAddr, topic, perOp, value)
			secure += benchProduce(b, sslAddr, topic, perOp, value, tlsOpt)
		}
		report(b, b.N*perOp, secure, plain)
	})
	b.Run("consume", func(b *testing.B) {
		runs++
		const total = 50_000
		topic := fmt.Sprintf("bench-tls-consume-%d", runs)
		runnelTopic(b, node, topic, 3)
		benchProduce(b, node.KafkaAddr, topic, total, value)
		b.SetBytes(total * int64(len(value)))
		var secure, plain time.Duration
		for range b.N {
			plain += benchConsume(b, node.KafkaAddr, topic, total)
			secure += benchConsume(b, sslAddr, topic, total, tlsOpt)
		}
		report(b, b.N*total, secure, plain)
	})
}
