package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The streamed -o json document of a paged list is the document one
// response holding every item would print (writeJSON), whatever the pages.
func TestJSONArrayWriterMatchesWriteJSON(t *testing.T) {
	items := []json.RawMessage{
		json.RawMessage(`{"name":"a","partitions":1,"configs":{"x":"y"}}`),
		json.RawMessage(`{"name":"b","partitions":2,"replicas":[1,2]}`),
		json.RawMessage(`{"name":"c","partitions":3}`),
	}
	for _, pages := range [][]int{{}, {3}, {1, 2}, {1, 1, 1}, {0, 2, 0, 1}} {
		var got bytes.Buffer
		a := &jsonArrayWriter{w: &got, key: "topics"}
		n := 0
		for _, size := range pages {
			if err := a.write(items[n : n+size]); err != nil {
				t.Fatal(err)
			}
			n += size
		}
		if err := a.close(); err != nil {
			t.Fatal(err)
		}
		whole, _ := json.Marshal(map[string]any{"topics": append([]json.RawMessage{}, items[:n]...)})
		var want bytes.Buffer
		if err := writeJSON(&want, whole); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("pages %v:\n%s\nwant:\n%s", pages, got.String(), want.String())
		}
	}
}
