package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/client"
	"github.com/runnel/runnel/server/servertest"
)

// hostileBatch is a producer RecordBatch v2 of n records (key per keyed,
// value of valueSize bytes) with its record section compressed by codec
// (0 none, 1 gzip, 4 zstd), or replaced by body when body is not nil. The
// header, length and CRC are always valid: only the records are hostile.
func hostileBatch(t *testing.T, n, valueSize int, keyed bool, codec int16, body []byte) []byte {
	t.Helper()
	now := time.Now().UnixMilli()
	var records []byte
	value := make([]byte, valueSize)
	for i := range n {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		if keyed {
			r.Key = []byte(fmt.Sprintf("k%d", i))
		}
		r.Value = value
		enc := r.AppendTo(nil)[1:] // drop the placeholder zero length
		records = binary.AppendVarint(records, int64(len(enc)))
		records = append(records, enc...)
	}
	if body == nil {
		body = compressWith(t, codec, records)
	}
	b := kmsg.NewRecordBatch()
	b.Magic, b.LastOffsetDelta, b.NumRecords = 2, int32(n-1), int32(n)
	b.FirstTimestamp, b.MaxTimestamp = now, now
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	b.Attributes = codec
	b.Records = body
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func compressWith(t *testing.T, codec int16, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case 0:
		return data
	case 1:
		w = gzip.NewWriter(&buf)
	case 4:
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	default:
		t.Fatalf("codec %d", codec)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Issue 12 item 3: batches whose header and CRC are valid but whose records
// are not are refused at produce with the right Kafka code, the log is left
// as it was, and the records before them stay readable over HTTP.
func TestHostilePoisonBatchesRefused(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "poison", "partitions": 1}, 201, nil)
	c.json("POST", "/v1/topics", map[string]any{"name": "keyed", "partitions": 1,
		"configs": map[string]string{"cleanup.policy": "compact"}}, 201, nil)
	conn := rawDial(t, n.KafkaAddr)
	if r := rawProduce(t, conn, "poison", hostileBatch(t, 3, 10, true, 0, nil)); r.ErrorCode != 0 {
		t.Fatalf("good batch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	garbage := bytes.Repeat([]byte{0x5a, 0x17, 0x80}, 30)
	cases := []struct {
		name  string
		topic string
		batch []byte
		want  *kerr.Error
	}{
		{"gzip batch, valid CRC, garbage body", "poison", hostileBatch(t, 3, 10, true, 1, garbage), kerr.CorruptMessage},
		{"zstd batch, valid CRC, garbage body", "poison", hostileBatch(t, 3, 10, true, 4, garbage), kerr.CorruptMessage},
		{"uncompressed, valid framing, garbage records", "poison", hostileBatch(t, 3, 10, true, 0, append([]byte{0x0a}, garbage[:5]...)), kerr.CorruptMessage},
		{"keyless record on a compacted topic", "keyed", hostileBatch(t, 2, 10, false, 0, nil), kerr.InvalidRecord},
		{"zstd bomb past the decompression limit", "poison", hostileBatch(t, 40, 1<<20, true, 4, nil), kerr.InvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rawProduce(t, conn, tc.topic, tc.batch)
			if r.ErrorCode != tc.want.Code {
				t.Fatalf("produce: %v, want %v", kerr.ErrorForCode(r.ErrorCode), tc.want)
			}
		})
	}
	if end := httpEndOffset(t, n, "poison", 0); end != 3 {
		t.Fatalf("end offset %d after refused batches, want 3", end)
	}
	if end := httpEndOffset(t, n, "keyed", 0); end != 0 {
		t.Fatalf("compacted topic end offset %d, want 0", end)
	}
	var got consumePage
	c.json("GET", "/v1/topics/poison/partitions/0/records?offset=0", nil, 200, &got)
	if len(got.Records) != 3 || got.NextOffset != 3 {
		t.Fatalf("read %d records, next %d; want 3, 3", len(got.Records), got.NextOffset)
	}
}

// consumeRaw GETs a consume URL and returns status and body.
func consumeRaw(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// Issue 12 item 6: compression bombs over HTTP consume. A tiny zstd batch of
// a million empty records is read with max_bytes=1 and max_records=1: one
// record comes back, and the node stays small while consumers that never
// read their responses hold requests open.
func TestHostileCompressionBombConsume(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "bomb", "partitions": 1}, 201, nil)
	conn := rawDial(t, n.KafkaAddr)
	bomb := hostileBatch(t, 1_000_000, 0, false, 4, nil)
	t.Logf("bomb batch: %d bytes for 1,000,000 records", len(bomb))
	if r := rawProduce(t, conn, "bomb", bomb); r.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	base := n.URL + "/v1/topics/bomb/partitions/0/records?offset=0"
	for _, q := range []string{"&max_bytes=1", "&max_records=1"} {
		status, body := consumeRaw(t, base+q)
		var got consumePage
		if err := json.Unmarshal(body, &got); err != nil || status != 200 {
			t.Fatalf("%s: status %d, %d bytes: %v", q, status, len(body), err)
		}
		if len(got.Records) != 1 || got.NextOffset != 1 || len(body) > 4096 {
			t.Fatalf("%s: %d records, next %d, %d-byte response; want one record", q, len(got.Records), got.NextOffset, len(body))
		}
	}
	// Twenty consumers at once, asking for everything from offset 0 with
	// the default limits, none reading its response.
	var wg sync.WaitGroup
	conns := make([]net.Conn, 20)
	for i := range conns {
		cn, err := net.Dial("tcp", n.HTTPAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer cn.Close()
		conns[i] = cn
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Fprintf(cn, "GET /v1/topics/bomb/partitions/0/records?offset=0&max_records=%d HTTP/1.1\r\nHost: x\r\n\r\n", []int{1, 10000}[i%2])
		}()
	}
	wg.Wait()
	// The first byte of each answer: every response has been built (a
	// handler marshals the whole body before writing), none is read.
	for _, cn := range conns {
		cn.SetReadDeadline(time.Now().Add(120 * time.Second))
		if _, err := cn.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
	cur, peak := n.RSS()
	t.Logf("RSS %d MB, peak %d MB", cur>>20, peak>>20)
	if peak > 1<<30 {
		t.Fatalf("node peak RSS %d MB with 20 non-reading consumers, want < 1024", peak>>20)
	}
}

// Issue 12 item 3, readers: a batch damaged on disk in a way recovery does
// not notice (records garbage under a recomputed CRC) does not fail reads
// of the records before it; read first, it is a corrupt-batch problem naming
// its offset and where records resume, and reading from there works.
func TestHostileCorruptBatchOnDisk(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "rot", "partitions": 1}, 201, nil)
	conn := rawDial(t, n.KafkaAddr)
	for i := range 3 { // offsets 0-2, 3-5, 6-8
		if r := rawProduce(t, conn, "rot", hostileBatch(t, 3, 10, true, []int16{0, 1, 0}[i], nil)); r.ErrorCode != 0 {
			t.Fatalf("produce %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	n.Stop()
	seg := filepath.Join(n.DataDir, "partitions", "rot-0", "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	first := 12 + int(binary.BigEndian.Uint32(data[8:]))
	second := data[first : first+12+int(binary.BigEndian.Uint32(data[first+8:]))]
	for i := 61; i < len(second); i++ {
		second[i] = 0x5a // garbage gzip stream
	}
	binary.BigEndian.PutUint32(second[17:], crc32.Checksum(second[21:], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	n.Start()

	var got consumePage
	c.json("GET", "/v1/topics/rot/partitions/0/records?offset=0", nil, 200, &got)
	if len(got.Records) != 3 || got.NextOffset != 3 {
		t.Fatalf("before the bad batch: %d records, next %d; want 3, 3", len(got.Records), got.NextOffset)
	}
	for _, off := range []int{3, 4} {
		status, body := c.do("GET", fmt.Sprintf("/v1/topics/rot/partitions/0/records?offset=%d", off), "", nil)
		var p problem
		json.Unmarshal(body, &p)
		if status != 422 || p.Type != "urn:runnel:problem:corrupt-batch" || p.Offset == nil || *p.Offset != int64(off) ||
			p.NextOffset == nil || *p.NextOffset != 6 || p.Topic != "rot" || p.Partition == nil || *p.Partition != 0 {
			t.Fatalf("read at %d: status %d: %s", off, status, body)
		}
	}
	c.json("GET", "/v1/topics/rot/partitions/0/records?offset=6", nil, 200, &got)
	if len(got.Records) != 3 || got.Records[0].Offset != 6 || got.NextOffset != 9 {
		t.Fatalf("past the bad batch: %+v", got)
	}
	checkStreamEndsAtCorruptBatch(t, n)
	checkGroupPollMovesPastCorruptBatch(t, c)
}

// checkStreamEndsAtCorruptBatch: the SSE stream delivers the records before
// the bad batch, then an error event naming it.
func checkStreamEndsAtCorruptBatch(t *testing.T, n *servertest.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", n.URL+"/v1/topics/rot/records/stream?offset=earliest", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	records, event := 0, ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "record":
			records++
		case strings.HasPrefix(line, "data: ") && event == "error":
			var p problem
			json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &p)
			if records != 3 || p.Type != "urn:runnel:problem:corrupt-batch" || p.NextOffset == nil || *p.NextOffset != 6 {
				t.Fatalf("stream: %d records, then %s", records, line)
			}
			return
		}
	}
	t.Fatalf("stream ended after %d records without an error event: %v", records, sc.Err())
}

// checkGroupPollMovesPastCorruptBatch: an HTTP group member's poll answers
// the problem, and committing its next_offset moves the member past it.
func checkGroupPollMovesPastCorruptBatch(t *testing.T, c *apiClient) {
	var join api.GroupMembership
	c.json("POST", "/v1/groups/rotters/members", map[string]any{"topics": []string{"rot"}}, 200, &join)
	path := "/v1/groups/rotters/members/" + join.MemberID
	var res client.GroupPollResponse
	c.json("GET", path+"/records?max_records=10", nil, 200, &res)
	if len(res.Records) != 3 {
		t.Fatalf("first poll: %+v", res)
	}
	status, body := c.do("GET", path+"/records?max_records=10", "", nil)
	var p problem
	json.Unmarshal(body, &p)
	if status != 422 || p.Type != "urn:runnel:problem:corrupt-batch" || p.Topic != "rot" || p.Partition == nil || p.NextOffset == nil {
		t.Fatalf("poll at the bad batch: status %d: %s", status, body)
	}
	c.json("POST", path+"/offsets", map[string]any{"offsets": []map[string]any{
		{"topic": "rot", "partition": *p.Partition, "offset": *p.NextOffset}}}, 200, nil)
	c.json("GET", path+"/records?max_records=10", nil, 200, &res)
	if len(res.Records) != 3 || res.Records[0].Offset != 6 {
		t.Fatalf("poll after committing past the bad batch: %+v", res)
	}
}

// The decompression bound is --max-decompressed-batch-bytes: with 1 MiB, a
// batch inflating to 2 MiB is refused (INVALID_RECORD) and one of half a
// MiB stored.
func TestHostileDecompressionLimitFlag(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--max-decompressed-batch-bytes", "1048576"}})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "capped", "partitions": 1}, 201, nil)
	conn := rawDial(t, n.KafkaAddr)
	if r := rawProduce(t, conn, "capped", hostileBatch(t, 2, 1<<20, true, 4, nil)); r.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("2 MiB inflated: %v, want INVALID_RECORD", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := rawProduce(t, conn, "capped", hostileBatch(t, 2, 256<<10, true, 4, nil)); r.ErrorCode != 0 {
		t.Fatalf("512 KiB inflated: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if end := httpEndOffset(t, n, "capped", 0); end != 2 {
		t.Fatalf("end offset %d, want 2", end)
	}
}
