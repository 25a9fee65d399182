package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/internal/disktest"
	"github.com/runnel/runnel/server/servertest"
)

// TestDataDirPermissions: what a node writes under its data dir is readable
// by its own user only (directories 0700, files 0600), so other local users
// cannot read the records.
func TestDataDirPermissions(t *testing.T) {
	n := servertest.Start(t, servertest.Options{DataDir: filepath.Join(t.TempDir(), "data")})
	checkDataDirModes(t, n)
}

// TestDataDirPermissionsTightened: a data dir an older version made 0755
// gets runnel's own directories (partitions, meta) tightened to 0700 at
// start, so other users cannot reach the records below them.
func TestDataDirPermissionsTightened(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	for _, d := range []string{"partitions", "meta"} {
		if err := os.MkdirAll(filepath.Join(dataDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dataDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n := servertest.Start(t, servertest.Options{DataDir: dataDir})
	n.Stop()
	for _, d := range []string{"partitions", "meta"} {
		fi, err := os.Stat(filepath.Join(dataDir, d))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %v after start, want 0700", d, fi.Mode().Perm())
		}
	}
}

func checkDataDirModes(t *testing.T, n *servertest.Node) {
	t.Helper()
	c := newAPIClient(t, n)
	c.json(http.MethodPost, "/v1/topics", map[string]any{"name": "perms", "partitions": 1}, http.StatusCreated, nil)
	c.json(http.MethodPost, "/v1/topics/perms/records", map[string]any{"records": []any{map[string]any{"value": 1}}}, http.StatusOK, nil)
	n.Stop() // a clean stop writes the index files and the clean checkpoint
	var files []string
	err := filepath.WalkDir(n.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(n.DataDir, path)
		if strings.HasPrefix(rel, filepath.Join("meta", "snapshots", "snapshots")+string(filepath.Separator)) {
			return nil // raft's snapshot store, inside a 0700 directory
		}
		if d.IsDir() {
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("directory %s has mode %v, want 0700", rel, fi.Mode().Perm())
			}
			return nil
		}
		if strings.HasPrefix(rel, "meta"+string(filepath.Separator)) {
			return nil // badger's own files, inside a 0700 directory
		}
		files = append(files, filepath.Base(rel))
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("file %s has mode %v, want 0600", rel, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The partition's segment at least: a log whose tail is this small
	// is closed with no file written (its index files, state and high
	// watermark are left to its next open, as after a crash), and the
	// leader epochs live in the state file.
	if !slices.ContainsFunc(files, func(f string) bool { return strings.HasSuffix(f, ".log") }) || len(files) < 3 {
		t.Fatalf("files checked under %s: %v; want a segment among at least 3", n.DataDir, files)
	}
}

func metricsText(t *testing.T, n *servertest.Node) string {
	t.Helper()
	r, err := http.Get(n.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// TestDiskFullResumes: on a full disk HTTP produce answers 507 storage-error
// and Kafka produce KAFKA_STORAGE_ERROR, /readyz answers 503 naming the
// storage error and /v1/cluster shows it; once space is freed appends resume
// without a restart, and every acknowledged record is read back.
func TestDiskFullResumes(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	parts := filepath.Join(dataDir, "partitions") // the partitions get the small disk; metadata does not
	disktest.MountTmpfs(t, parts, 8<<20)
	ballast := filepath.Join(parts, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	// No reserve: this is the path of a log whose writes fail (the
	// reserve refusing appends first is TestFullDiskKeepsMetadataAlive's).
	n := servertest.Start(t, servertest.Options{DataDir: dataDir, Args: []string{"--storage-retry-interval", "200ms", "--min-free-disk", "0"}})
	c := newAPIClient(t, n)
	c.json(http.MethodPost, "/v1/topics", map[string]any{"name": "full", "partitions": 1, "replication_factor": 1}, http.StatusCreated, nil)

	acked := map[int64]string{} // offset -> base64 value
	rng := rand.New(rand.NewPCG(1, 2))
	produce := func(records, size int) (int, []byte) {
		var recs []any
		var vals []string
		for i := 0; i < records; i++ {
			v := make([]byte, size)
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
			vals = append(vals, base64.StdEncoding.EncodeToString(v))
			recs = append(recs, map[string]any{"value": vals[i], "partition": 0})
		}
		body, _ := json.Marshal(map[string]any{"records": recs})
		status, resp := c.do(http.MethodPost, "/v1/topics/full/records?encoding=base64", "application/json", body)
		if status == http.StatusOK {
			var out producedOffsets
			if err := json.Unmarshal(resp, &out); err != nil {
				t.Fatal(err)
			}
			for i, o := range out.Offsets {
				acked[o.Offset] = vals[i]
			}
		}
		return status, resp
	}
	var status int
	var resp []byte
	for i := 0; i < 200; i++ { // 200 x 128 KiB is three times the disk
		if status, resp = produce(4, 32<<10); status != http.StatusOK {
			break
		}
	}
	var p problem
	_ = json.Unmarshal(resp, &p)
	if status != http.StatusInsufficientStorage || !strings.HasSuffix(p.Type, ":storage-error") {
		t.Fatalf("produce on a full disk: status %d %s, want 507 storage-error", status, resp)
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged before the disk filled up")
	}
	t.Logf("%d records acknowledged before the disk filled up; then: %s", len(acked), p.Detail)

	servertest.WaitFor(t, 30*time.Second, "/readyz to report the storage error", func() bool {
		r, err := http.Get(n.URL + "/readyz")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "storage error")
	})
	var cl api.Cluster
	c.json(http.MethodGet, "/v1/cluster", nil, http.StatusOK, &cl)
	if !strings.Contains(cl.Node.StorageError, "full-0") || len(cl.Brokers) != 1 || cl.Brokers[0].StorageError == "" {
		t.Fatalf("/v1/cluster does not show the storage error: %+v", cl)
	}
	if m := metricsText(t, n); !strings.Contains(m, "\nrunnel_storage_failed_partitions 1\n") {
		t.Fatalf("/metrics does not count the failed partition:\n%s", m)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kc, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.RecordRetries(1), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	err = kc.ProduceSync(ctx, &kgo.Record{Topic: "full", Partition: 0, Value: []byte("kafka")}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("Kafka produce on a full disk: %v, want KAFKA_STORAGE_ERROR", err)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	servertest.WaitFor(t, 30*time.Second, "appends to resume after space was freed", func() bool {
		s, _ := produce(1, 1024)
		return s == http.StatusOK
	})
	for i := 0; i < 5; i++ {
		if s, r := produce(2, 1024); s != http.StatusOK {
			t.Fatalf("produce after recovery: %d %s", s, r)
		}
	}
	servertest.WaitFor(t, 30*time.Second, "/readyz to answer 200 again", func() bool {
		r, err := http.Get(n.URL + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})

	if m := metricsText(t, n); !strings.Contains(m, "\nrunnel_storage_failed_partitions 0\n") {
		t.Fatalf("/metrics still counts a failed partition:\n%s", m)
	}
	got := map[int64]string{}
	for off := int64(0); ; {
		var out consumePage
		c.json(http.MethodGet, fmt.Sprintf("/v1/topics/full/partitions/0/records?offset=%d&encoding=base64&max_records=100", off), nil, http.StatusOK, &out)
		for _, r := range out.Records {
			got[r.Offset], _ = r.Value.(string) // base64
		}
		if out.NextOffset >= out.HighWatermark || len(out.Records) == 0 {
			break
		}
		off = out.NextOffset
	}
	for off, v := range acked {
		if got[off] != v {
			t.Fatalf("acknowledged offset %d: read %d bytes, want the acknowledged value (read %d records)", off, len(got[off]), len(got))
		}
	}
	t.Logf("all %d acknowledged records read back", len(acked))
}

// TestHostHeaderChecked: with no authentication, a request naming a host
// this node does not serve (a DNS rebinding page on attacker.example
// resolving to 127.0.0.1) is refused with 421 problem+json; localhost, IP
// literals and names given in --http-allowed-hosts are served.
func TestHostHeaderChecked(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--http-allowed-hosts", "runnel.internal,*.example.net"}})
	get := func(host string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, n.URL+"/v1/topics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}
	_, port, _ := strings.Cut(n.HTTPAddr, ":")
	for _, host := range []string{"attacker.example:" + port, "attacker.example", "runnel.internal.attacker.example", "example.net"} {
		status, h, body := get(host)
		var p problem
		_ = json.Unmarshal(body, &p)
		if status != http.StatusMisdirectedRequest || h.Get("Content-Type") != "application/problem+json" || !strings.HasSuffix(p.Type, ":host-not-allowed") {
			t.Fatalf("Host %s: %d %s %s, want 421 host-not-allowed", host, status, h.Get("Content-Type"), body)
		}
	}
	for _, host := range []string{"localhost:" + port, "LOCALHOST.", "127.0.0.1:" + port, "[::1]:" + port, "10.1.2.3", "runnel.internal:" + port, "a.example.net", "app.localhost"} {
		if status, _, body := get(host); status != http.StatusOK {
			t.Fatalf("Host %s: %d %s, want 200", host, status, body)
		}
	}
}

// losslessHeaders is what TestHTTPConsumeHeadersLossless* produce: a repeated
// key, a key that is not UTF-8, a binary value and a null value.
var losslessHeaders = []kgo.RecordHeader{
	{Key: "trace", Value: []byte("a")},
	{Key: "trace", Value: []byte("b")},
	{Key: "\xff\xfebin", Value: []byte{0, 1, 0xff}},
	{Key: "null-value", Value: nil},
	{Key: "trace", Value: []byte("c")},
}

// TestHTTPConsumeHeadersLossless: headers written by a Kafka producer with a
// repeated key, a key that is not UTF-8, a binary value and a null value
// read back over HTTP consume exactly, in order, in header_list (the headers
// object, kept for old clients, cannot hold them).
func TestHTTPConsumeHeadersLossless(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json(http.MethodPost, "/v1/topics", map[string]any{"name": "hdrs", "partitions": 1}, http.StatusCreated, nil)
	produceWithHeaders(t, n.KafkaAddr, "hdrs")
	checkHeaderList(t, c, "hdrs")
}

// TestHTTPConsumeHeadersLosslessForwarded: the same through a node that
// forwards the consume to the partition's leader.
func TestHTTPConsumeHeadersLosslessForwarded(t *testing.T) {
	cl := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 2})
	c := newAPIClient(t, cl.Node(1))
	c.json(http.MethodPost, "/v1/topics", map[string]any{"name": "hdrs", "partitions": 1, "replication_factor": 1}, http.StatusCreated, nil)
	var topic api.TopicDetail
	servertest.WaitFor(t, 30*time.Second, "a leader", func() bool {
		c.json(http.MethodGet, "/v1/topics/hdrs", nil, http.StatusOK, &topic)
		return topic.Partitions[0].Leader > 0
	})
	leader := cl.Node(int(topic.Partitions[0].Leader))
	other := cl.Node(3 - int(topic.Partitions[0].Leader))
	produceWithHeaders(t, leader.KafkaAddr, "hdrs")
	checkHeaderList(t, newAPIClient(t, other), "hdrs")
}

// produceWithHeaders writes one record with losslessHeaders over Kafka.
func produceWithHeaders(t *testing.T, kafkaAddr, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kc, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	if err := kc.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Headers: losslessHeaders}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// checkHeaderList consumes the one record of topic with each encoding and
// compares its header_list with losslessHeaders.
func checkHeaderList(t *testing.T, c *apiClient, topic string) {
	t.Helper()
	want := losslessHeaders
	for _, enc := range []string{"json", "string", "base64"} {
		var out consumePage
		c.json(http.MethodGet, "/v1/topics/"+topic+"/partitions/0/records?offset=earliest&encoding="+enc, nil, http.StatusOK, &out)
		if len(out.Records) != 1 {
			t.Fatalf("encoding=%s: %d records", enc, len(out.Records))
		}
		got := headerList(out.Records[0])
		if len(got) != len(want) {
			t.Fatalf("encoding=%s: header_list %+v, want %d headers", enc, got, len(want))
		}
		decode := func(s string, encoding string) []byte {
			if encoding == "base64" {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					t.Fatalf("encoding=%s: %q: %v", enc, s, err)
				}
				return b
			}
			return []byte(s)
		}
		for i, h := range got {
			if k := string(decode(h.Key, string(h.KeyEncoding))); k != want[i].Key {
				t.Fatalf("encoding=%s: header %d key %q, want %q", enc, i, k, want[i].Key)
			}
			switch {
			case want[i].Value == nil && h.Value != nil:
				t.Fatalf("encoding=%s: header %d value %q, want null", enc, i, *h.Value)
			case want[i].Value != nil && (h.Value == nil || string(decode(*h.Value, string(h.ValueEncoding))) != string(want[i].Value)):
				t.Fatalf("encoding=%s: header %d value %v (%s), want %q", enc, i, h.Value, h.ValueEncoding, want[i].Value)
			}
		}
		if _, ok := out.Records[0].Headers["trace"]; !ok {
			t.Fatalf("encoding=%s: the headers object lost its simple case: %v", enc, out.Records[0].Headers)
		}
	}
}

// TestDiskFullShownByOtherNodes: a broker whose disk is full reports it in
// its heartbeats, so GET /v1/cluster on another node shows it on that
// broker's entry, and clears it once the disk recovered.
func TestDiskFullShownByOtherNodes(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "node-2")
	parts := filepath.Join(dataDir, "partitions")
	disktest.MountTmpfs(t, parts, 4<<20)
	ballast := filepath.Join(parts, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	cl := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 2,
		// No reserve: this follows a log whose writes fail (see TestDiskFullResumes).
		Args: []string{"--storage-retry-interval", "200ms", "--broker-heartbeat-interval", "200ms", "--min-free-disk", "0"},
		NodeArgs: func(id int) []string {
			if id == 2 {
				return []string{"--data-dir", dataDir}
			}
			return nil
		}})
	c1, c2 := newAPIClient(t, cl.Node(1)), newAPIClient(t, cl.Node(2))
	c1.json(http.MethodPost, "/v1/topics", map[string]any{"name": "full", "partitions": 4, "replication_factor": 1}, http.StatusCreated, nil)
	var topic api.TopicDetail
	part := int32(-1)
	servertest.WaitFor(t, 30*time.Second, "a partition led by node 2", func() bool {
		c1.json(http.MethodGet, "/v1/topics/full", nil, http.StatusOK, &topic)
		for _, p := range topic.Partitions {
			if p.Leader == 2 {
				part = p.Partition
			}
		}
		return part >= 0
	})
	value := base64.StdEncoding.EncodeToString(make([]byte, 64<<10))
	body, _ := json.Marshal(map[string]any{"records": []any{map[string]any{"value": value, "partition": part}}})
	var status int
	for i := 0; i < 200 && status != http.StatusInsufficientStorage; i++ { // 200 x 64 KiB is three times the disk
		status, _ = c2.do(http.MethodPost, "/v1/topics/full/records?encoding=base64", "application/json", body)
	}
	if status != http.StatusInsufficientStorage {
		t.Fatalf("produce to node 2's full disk: last status %d, want 507", status)
	}
	storageOf := func(c *apiClient, id int32) string {
		var out api.Cluster
		c.json(http.MethodGet, "/v1/cluster", nil, http.StatusOK, &out)
		for _, b := range out.Brokers {
			if b.ID == id {
				return b.StorageError
			}
		}
		return ""
	}
	servertest.WaitFor(t, 30*time.Second, "node 1 to show node 2's storage error", func() bool {
		return strings.Contains(storageOf(c1, 2), fmt.Sprintf("full-%d", part))
	})
	if s := storageOf(c1, 1); s != "" {
		t.Fatalf("node 1's own entry shows a storage error: %s", s)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	servertest.WaitFor(t, 30*time.Second, "node 1 to show node 2 healthy again", func() bool {
		return storageOf(c1, 2) == ""
	})
	small, _ := json.Marshal(map[string]any{"records": []any{map[string]any{"value": "aGk=", "partition": part}}})
	if s, r := c2.do(http.MethodPost, "/v1/topics/full/records?encoding=base64", "application/json", small); s != http.StatusOK {
		t.Fatalf("produce after recovery: %d %s", s, r)
	}
}

// A second process on a data dir in use is refused at once, naming it
// (flock on <data-dir>/.lock; lockFile's platform files).
func TestDataDirInUseRefused(t *testing.T) {
	first := servertest.Start(t, servertest.Options{KafkaAddr: "-"})
	second := servertest.New(t, servertest.Options{NodeID: 2, DataDir: first.DataDir, KafkaAddr: "-"})
	second.StartNoWait()
	code, exited := second.WaitExit(60 * time.Second)
	if !exited {
		second.Kill()
		t.Fatalf("a second process on a data dir in use runs; its log:\n%s", second.Logs())
	}
	if want := "is in use by another runnel process"; code != 1 || !strings.Contains(second.Logs(), want) {
		t.Fatalf("exit code %d, log %q; want 1 and %q", code, second.Logs(), want)
	}
}
