package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/runnel/runnel/server/servertest"
)

// The plaintext HTTP port speaks HTTP/2 with prior knowledge (h2c): a
// client that only speaks h2c produces and consumes over one connection.
func TestHTTPDoorH2C(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &p}}
	defer client.CloseIdleConnections()
	do := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, n.URL+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s over h2c: %v", method, path, err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 || resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %s %d %s", method, path, resp.Proto, resp.StatusCode, data)
		}
		return string(data)
	}
	do("POST", "/v1/topics", `{"name":"h2c","partitions":1}`)
	do("POST", "/v1/topics/h2c/records?encoding=string", `{"records":[{"value":"over h2c"}]}`)
	if got := do("GET", "/v1/topics/h2c/partitions/0/records?encoding=string", ""); !strings.Contains(got, `"value":"over h2c"`) {
		t.Fatalf("consumed %s", got)
	}
}

// Binary media types end to end: a RecordBatch v2 body and an
// application/octet-stream record go in, JSON and RecordBatch come out with
// the same bytes; a damaged batch is refused and writes nothing.
func TestHTTPDoorBinary(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	if resp, err := http.Post(n.URL+"/v1/topics", "application/json", strings.NewReader(`{"name":"bin","partitions":2}`)); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create topic: %v %v", err, resp)
	}
	post := func(path, ctype string, body []byte, hdr map[string][]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", n.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		for k, vs := range hdr {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	batch := kafkaBatch([][]byte{[]byte("one"), {0xff, 0}, []byte("three")})
	if code, body := post("/v1/topics/bin/records?partition=1", batchMediaType, batch, nil); code != 200 ||
		body != `{"offsets":[{"partition":1,"offset":0},{"partition":1,"offset":1},{"partition":1,"offset":2}]}`+"\n" {
		t.Fatalf("batch produce: %d %s", code, body)
	}
	bad := bytes.Clone(batch)
	bad[len(bad)-1] ^= 1 // the CRC no longer matches
	if code, body := post("/v1/topics/bin/records?partition=1", batchMediaType, bad, nil); code != 400 {
		t.Fatalf("damaged batch: %d %s", code, body)
	}
	if code, body := post("/v1/topics/bin/records", batchMediaType, batch, nil); code != 400 || !strings.Contains(body, "query.partition") {
		t.Fatalf("batch without partition: %d %s", code, body)
	}
	code, body := post("/v1/topics/bin/records?partition=1", "application/octet-stream", []byte("raw\x00value"),
		map[string][]string{"Runnel-Key": {"k%20ey"}, "Runnel-Header": {"a=1, b=%FF", "a=2"}, "Runnel-Timestamp": {"1700000000000"}})
	if code != 200 || !strings.Contains(body, `"offset":3`) {
		t.Fatalf("octet-stream produce: %d %s", code, body)
	}

	get := func(accept string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", n.URL+"/v1/topics/bin/partitions/1/records?offset=1&encoding=base64", nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("consume %s: %d %s", accept, resp.StatusCode, data)
		}
		return resp, data
	}
	_, js := get("application/json")
	var res consumePage
	if err := json.Unmarshal(js, &res); err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	if len(res.Records) != 3 || res.Records[0].Value != b64([]byte{0xff, 0}) || res.Records[1].Value != b64([]byte("three")) ||
		res.Records[2].Value != b64([]byte("raw\x00value")) || res.Records[2].Key == nil || *res.Records[2].Key != b64([]byte("k ey")) ||
		res.Records[2].Timestamp != 1700000000000 || len(headerList(res.Records[2])) != 3 ||
		headerList(res.Records[2])[1].Value == nil || *headerList(res.Records[2])[1].Value != b64([]byte{0xff}) || res.NextOffset != 4 {
		t.Fatalf("consumed %s", js)
	}
	resp, raw := get(batchMediaType)
	if ct := resp.Header.Get("Content-Type"); ct != batchMediaType || resp.Header.Get("Runnel-Next-Offset") != "4" || resp.Header.Get("Runnel-High-Watermark") != "4" {
		t.Fatalf("binary consume headers: %v", resp.Header)
	}
	if !bytes.Equal(raw[12:len(batch)], batch[12:]) { // base offset aside, the stored batch is the one sent
		t.Fatalf("binary consume returned %d bytes, the first batch differs from the one produced", len(raw))
	}
	if n, _, _, err := countBinary(resp.Header, raw, 1); err != nil || n != 3 {
		t.Fatalf("binary consume: %d records from offset 1, %v", n, err)
	}
}

// The binary media types, compression and h2c with curl, as the README
// shows them: a file posted with --data-binary as one record and as a
// RecordBatch, read back over h2c with --compressed.
func TestHTTPDoorCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		servertest.MissingTool(t, "curl not installed")
	}
	n := servertest.Start(t, servertest.Options{})
	dir := t.TempDir()
	value := filepath.Join(dir, "value.bin")
	batch := filepath.Join(dir, "batch.bin")
	if err := os.WriteFile(value, []byte("raw\x00bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(batch, kafkaBatch([][]byte{[]byte("b0"), []byte("b1")}), 0o644); err != nil {
		t.Fatal(err)
	}
	curl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("curl", append([]string{"-sS", "--fail-with-body"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	curl("-X", "POST", n.URL+"/v1/topics", "-H", "Content-Type: application/json", "-d", `{"name":"curl","partitions":1}`)
	curl("-X", "POST", n.URL+"/v1/topics/curl/records", "-H", "Content-Type: application/octet-stream",
		"-H", "Runnel-Key: carol", "--data-binary", "@"+value)
	if out := curl("-X", "POST", n.URL+"/v1/topics/curl/records?partition=0", "-H", "Content-Type: application/vnd.kafka.recordbatch",
		"--data-binary", "@"+batch); !strings.Contains(out, `"offset":2`) {
		t.Fatalf("batch produce: %s", out)
	}
	out := curl("--http2-prior-knowledge", "--compressed", "-w", "\n%{http_version}", n.URL+"/v1/topics/curl/partitions/0/records?encoding=base64")
	for _, want := range []string{`"key":"Y2Fyb2w="`, `"value":"` + base64.StdEncoding.EncodeToString([]byte("raw\x00bytes")) + `"`,
		`"value":"YjE="`, "\n2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("consumed %s, want %s", out, want)
		}
	}
}

// A zip bomb (256 MiB of zeros in a few hundred KiB of gzip, and as
// zstd; the body limit is 16 MiB) is refused 413 once its decompressed
// bytes pass the limit, and the node's memory stays far below its size.
func TestHTTPDoorZipBomb(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	zero := make([]byte, 1<<20)
	var gz, zs bytes.Buffer
	gzw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	zsw, _ := zstd.NewWriter(&zs, zstd.WithEncoderLevel(zstd.SpeedFastest))
	for range 256 {
		gzw.Write(zero)
		zsw.Write(zero)
	}
	gzw.Close()
	zsw.Close()
	for name, body := range map[string][]byte{"gzip": gz.Bytes(), "zstd": zs.Bytes()} {
		req, _ := http.NewRequest("POST", n.URL+"/v1/topics", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", name)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(data), "request-too-large") {
			t.Fatalf("%s bomb of %d bytes: %d %s", name, len(body), resp.StatusCode, data)
		}
	}
	if _, peak := n.RSS(); peak > 512<<20 {
		t.Fatalf("peak RSS %d MiB after the bombs", peak>>20)
	}
}
