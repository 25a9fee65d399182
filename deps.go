//go:build tools

package runnel

import (
	_ "github.com/IBM/sarama"
	_ "github.com/chromedp/chromedp"
	_ "github.com/dgraph-io/badger/v4"
	_ "github.com/getkin/kin-openapi/openapi3filter"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/hashicorp/raft"
	_ "github.com/klauspost/compress/s2"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/nats-io/nuid"
	_ "github.com/oapi-codegen/runtime"
	_ "github.com/pierrec/lz4/v4"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "gopkg.in/yaml.v3"
)
