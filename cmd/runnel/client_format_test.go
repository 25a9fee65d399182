package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestBuildRecord(t *testing.T) {
	for _, tc := range []struct {
		name    string
		line    string
		opts    produceOptions
		want    string // the record as JSON
		wantErr string
	}{
		{"string", `hello "world"`, produceOptions{encoding: encodingString, partition: -1},
			`{"value":"hello \"world\""}`, ""},
		{"string keyed", "k1:v:1", produceOptions{encoding: encodingString, keySep: ":", partition: -1},
			`{"key":"k1","value":"v:1"}`, ""},
		{"empty key", "\tv", produceOptions{encoding: encodingString, keySep: "\t", partition: -1},
			`{"key":"","value":"v"}`, ""},
		{"no separator", "v", produceOptions{encoding: encodingString, keySep: "|", partition: -1},
			"", "no key separator"},
		{"partition", "v", produceOptions{encoding: encodingString, partition: 3},
			`{"value":"v","partition":3}`, ""},
		{"json", `{"a": [1, 2]}`, produceOptions{encoding: encodingJSON, partition: -1},
			`{"value":{"a":[1,2]}}`, ""},
		{"json keyed", `id7 => 42`, produceOptions{encoding: encodingJSON, keySep: " => ", partition: -1},
			`{"key":"id7","value":42}`, ""},
		{"json invalid", `{"a":`, produceOptions{encoding: encodingJSON, partition: -1},
			"", "not valid JSON"},
		{"base64", "aGk=", produceOptions{encoding: encodingBase64, partition: -1},
			`{"value":"aGk="}`, ""},
		{"base64 keyed", "a2V5,aGk=", produceOptions{encoding: encodingBase64, keySep: ",", partition: -1},
			`{"key":"a2V5","value":"aGk="}`, ""},
		{"base64 invalid value", "hi!", produceOptions{encoding: encodingBase64, partition: -1},
			"", "value is not valid base64"},
		{"base64 invalid key", "k!,aGk=", produceOptions{encoding: encodingBase64, keySep: ",", partition: -1},
			"", "key is not valid base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := buildRecord([]byte(tc.line), tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("record %s, want %s", b, tc.want)
			}
		})
	}
}

// TestBuildRecordCopies guards against keeping a slice of the scanner's
// buffer, which the next line overwrites.
func TestBuildRecordCopies(t *testing.T) {
	line := []byte(`{"n":1}`)
	rec, err := buildRecord(line, produceOptions{encoding: encodingJSON, partition: -1})
	if err != nil {
		t.Fatal(err)
	}
	copy(line, `{"n":2}`)
	if string(rec.Value) != `{"n":1}` {
		t.Fatalf("value changed with the input buffer: %s", rec.Value)
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{5 << 20, "5.0 MiB"}, {3 << 30, "3.0 GiB"}, {2 << 40, "2.0 TiB"},
	} {
		if got := formatBytes(tc.n); got != tc.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestRenderProgress(t *testing.T) {
	for _, tc := range []struct {
		done, total, records int64
		want                 string
	}{
		{0, 2048, 0, "[..............................]   0%  0 B/2.0 KiB  0 records  0s"},
		{1024, 2048, 10, "[###############...............]  50%  1.0 KiB/2.0 KiB  10 records  0s"},
		{4096, 2048, 20, "[##############################] 100%  2.0 KiB/2.0 KiB  20 records  0s"},
	} {
		if got := renderProgress(tc.done, tc.total, tc.records, 0); got != tc.want {
			t.Errorf("renderProgress(%d, %d) =\n%q, want\n%q", tc.done, tc.total, got, tc.want)
		}
	}
}

func TestProgressBarThrottlesAndFinishes(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	b := newProgressBar(&buf, 100)
	b.now = func() time.Time { return now }
	b.start = now
	b.update(10, 1) // first draw
	now = now.Add(progressInterval / 2)
	b.update(20, 2) // throttled
	now = now.Add(progressInterval)
	b.update(30, 3) // drawn
	b.finish(100, 10)
	out := buf.String()
	if n := strings.Count(out, "\r"); n != 3 {
		t.Fatalf("%d redraws, want 3: %q", n, out)
	}
	if strings.Contains(out, " 20%") || !strings.Contains(out, " 30%") || !strings.HasSuffix(out, "10 records  0s\n") {
		t.Fatalf("unexpected progress output %q", out)
	}
	var nilBar *progressBar
	nilBar.update(1, 1) // must not panic
	nilBar.finish(1, 1)
}

func TestWriteTopicList(t *testing.T) {
	var buf bytes.Buffer
	tbl := newTable(&buf, "NAME", "PARTITIONS", "REPLICATION", "SIZE")
	writeTopicRows(tbl, topicList{Topics: []topicSummary{
		{Name: "zeta", Partitions: 1, ReplicationFactor: 1},
		{Name: "alpha", Partitions: 12, ReplicationFactor: 3, SizeBytes: 3 << 20},
		{Name: "__consumer_offsets", Partitions: 50, ReplicationFactor: 3, Internal: true},
	}})
	if err := tbl.flush(); err != nil {
		t.Fatal(err)
	}
	want := "NAME                           PARTITIONS  REPLICATION  SIZE\n" +
		"__consumer_offsets (internal)  50          3            0 B\n" +
		"alpha                          12          3            3.0 MiB\n" +
		"zeta                           1           1            0 B\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestWriteTopicDetail(t *testing.T) {
	var buf bytes.Buffer
	err := writeTopicDetail(&buf, topicDetail{
		Name: "orders", ReplicationFactor: 2,
		Configs: map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"},
		Partitions: []partitionInfo{
			{Partition: 1, Leader: -1, Replicas: []int32{2, 3}, ISR: nil},
			{Partition: 0, Leader: 2, Replicas: []int32{2, 3}, ISR: []int32{2, 3}, StartOffset: 5, EndOffset: 9, HighWatermark: 8, SizeBytes: 2048},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "Topic:               orders\n" +
		"Partitions:          2\n" +
		"Replication factor:  2\n" +
		"Configs:\n" +
		"  cleanup.policy=compact\n" +
		"  retention.ms=1000\n" +
		"\n" +
		"PARTITION  LEADER  REPLICAS  ISR  START  END  HIGH WATERMARK  SIZE\n" +
		"0          2       2,3       2,3  5      9    8               2.0 KiB\n" +
		"1          none    2,3       -    0      0    0               0 B\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestWriteCluster(t *testing.T) {
	for _, tc := range []struct {
		name string
		ci   clusterInfo
		want []string
	}{
		{"leader known", clusterInfo{
			ClusterID: "c-1", LeaderID: 1,
			Controllers: []controllerInfo{{ID: 2, Address: "h2:9093", Role: "follower", Term: 3, LastIndex: 10, CommitIndex: 10},
				{ID: 1, Address: "h1:9093", Role: "leader", Term: 3, LastIndex: 11, CommitIndex: 10}},
			Brokers: []brokerInfo{{ID: 1, State: "alive", Epoch: 4, MetadataOffset: 11, HTTPAddress: "h1:8080", KafkaAddress: "h1:9092", Partitions: 6, Leaders: 2}},
		}, []string{
			"Cluster ID:         c-1\n",
			"Active controller:  1\n",
			"CONTROLLERS\nID  ADDRESS  ROLE      TERM  LAST INDEX  COMMIT INDEX\n1   h1:9093  leader    3     11          10\n2   h2:9093  follower  3     10          10\n",
			"BROKERS\nID  STATE  RACK  EPOCH  METADATA OFFSET  HTTP ADDRESS  KAFKA ADDRESS  REPLICAS  LEADERS\n1   alive  -     4      11               h1:8080       h1:9092        6         2\n",
		}},
		{"no leader", clusterInfo{ClusterID: "c-2", LeaderID: -1},
			[]string{"Active controller:  none\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeCluster(&buf, tc.ci); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Fatalf("output\n%s\nlacks\n%s", buf.String(), w)
				}
			}
		})
	}
}

func TestWriteProduceSummary(t *testing.T) {
	var buf bytes.Buffer
	err := writeProduceSummary(&buf, produceSummary{
		Topic: "t", Records: 1200, Batches: 3, Bytes: 2048, ElapsedMS: 400,
		Partitions: []partitionSummary{{Partition: 0, Records: 1200, FirstOffset: 0, LastOffset: 1199}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "Produced 1200 records (2.0 KiB) to topic \"t\" in 3 batches, 400ms, 3000 records/s.\n" +
		"PARTITION  RECORDS  FIRST OFFSET  LAST OFFSET\n" +
		"0          1200     0             1199\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestNextOffset(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp fetchResponse
		want int64
	}{
		{"after last", fetchResponse{NextOffset: 10, Records: []json.RawMessage{[]byte(`{"offset":9}`)}}, 10},
		{"missing next", fetchResponse{Records: []json.RawMessage{[]byte(`{"offset":4}`), []byte(`{"offset":7}`)}}, 8},
		{"next beyond a full response", fetchResponse{NextOffset: 900, Records: []json.RawMessage{[]byte(`{"offset":0}`), []byte(`{"offset":1}`)}}, 2},
		{"empty", fetchResponse{NextOffset: 3}, 3},
		{"no offset field", fetchResponse{NextOffset: 5, Records: []json.RawMessage{[]byte(`{}`)}}, 5},
	} {
		if got := nextOffset(tc.resp); got != tc.want {
			t.Errorf("%s: nextOffset = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// FuzzBuildRecord feeds arbitrary input lines (produce reads untrusted files)
// and checks that an accepted line always becomes a valid request record and,
// for UTF-8 text, that key and value reassemble the line.
func FuzzBuildRecord(f *testing.F) {
	f.Add([]byte("k:v"), ":", uint8(0))
	f.Add([]byte(`{"a":1}`), "", uint8(1))
	f.Add([]byte("aGk="), "", uint8(2))
	f.Add([]byte("\xff\xfe:x"), ":", uint8(0))
	encodings := []string{encodingString, encodingJSON, encodingBase64}
	f.Fuzz(func(t *testing.T, line []byte, sep string, enc uint8) {
		o := produceOptions{encoding: encodings[int(enc)%len(encodings)], keySep: sep, partition: -1}
		rec, err := buildRecord(line, o)
		if err != nil {
			return
		}
		b, err := json.Marshal(rec)
		if err != nil || !json.Valid(b) || !json.Valid(rec.Value) {
			t.Fatalf("accepted line %q gave an invalid record %s: %v", line, b, err)
		}
		if o.encoding != encodingString || !utf8.Valid(line) || !utf8.ValidString(sep) {
			return
		}
		var value string
		if err := json.Unmarshal(rec.Value, &value); err != nil {
			t.Fatal(err)
		}
		got := value
		if rec.Key != nil {
			got = *rec.Key + sep + value
		}
		if got != string(line) {
			t.Fatalf("line %q came back as %q", line, got)
		}
	})
}
