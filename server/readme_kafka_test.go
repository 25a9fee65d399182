package server

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/server/broker/topicconfig"
)

// README's Kafka section lists every API key the listener serves with its
// versions (kafkaproto's handler table) and every topic config with its
// default and accepted values (topicConfigDefs), between markers. This test
// fails when they drift; RUNNEL_UPDATE_README=1 rewrites them.

const readmePath = "../README.md"

func readmeKafkaAPIs() string {
	var b strings.Builder
	b.WriteString("| key | API | versions |\n|---:|---|---|\n")
	for _, v := range kafkaproto.SupportedVersions() {
		fmt.Fprintf(&b, "| %d | %s | %d-%d |\n", v.Key, v.Name, v.MinVersion, v.MaxVersion)
	}
	return b.String()
}

func readmeTopicConfigs() string {
	var b strings.Builder
	b.WriteString("| config | default | accepted | runnel |\n|---|---|---|---|\n")
	for _, d := range topicconfig.Defs() {
		def := d.Def
		switch def {
		case "":
			def = "(empty)"
		case strconv.FormatInt(math.MaxInt64, 10):
			def = "2^63-1"
		}
		accepted := d.Allowed
		if d.Check == nil {
			accepted = fmt.Sprintf("integer ≥ %d", d.Min)
			if d.Kind == 3 {
				accepted = fmt.Sprintf("integer ≥ %d (32 bits)", d.Min)
			}
		}
		what := d.Doc
		if d.NotApplied != "" {
			what = "accepted, read-only in DescribeConfigs: " + d.NotApplied
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.Name, def, accepted, what)
	}
	return b.String()
}

// replaceBetween puts body between "<!-- name:begin -->" and "<!-- name:end -->".
func replaceBetween(doc, name, body string) (string, bool) {
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return doc, false
	}
	return doc[:i+len(begin)] + body + doc[j:], true
}

func TestREADMEKafkaTables(t *testing.T) {
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, d := range topicconfig.Defs() {
		if d.Check != nil && d.Allowed == "" {
			t.Errorf("topic config %s has a check but no allowed text", d.Name)
		}
	}
	want := doc
	for _, s := range []struct{ name, body string }{
		{"kafka-apis", readmeKafkaAPIs()},
		{"topic-configs", readmeTopicConfigs()},
	} {
		var ok bool
		if want, ok = replaceBetween(want, s.name, s.body); !ok {
			t.Fatalf("README.md has no <!-- %s:begin --> ... <!-- %s:end --> section", s.name, s.name)
		}
	}
	if want == doc {
		return
	}
	if os.Getenv("RUNNEL_UPDATE_README") == "1" {
		if err := os.WriteFile(readmePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("README.md's Kafka API or topic config table is stale: run RUNNEL_UPDATE_README=1 go test -run TestREADMEKafkaTables ./server/")
}
