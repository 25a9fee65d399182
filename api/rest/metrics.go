package rest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the api's Prometheus collectors, registered on Options.Registerer.
type metrics struct {
	duration        *prometheus.HistogramVec
	producedRecords *prometheus.CounterVec
	producedBytes   *prometheus.CounterVec
	consumedRecords *prometheus.CounterVec
	consumedBytes   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "runnel_http_request_duration_seconds",
			Help:    "HTTP request durations by route pattern, method and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method", "code"}),
		producedRecords: counter("runnel_http_produced_records_total", "Records produced over HTTP."),
		producedBytes:   counter("runnel_http_produced_bytes_total", "Key, value and header bytes produced over HTTP."),
		consumedRecords: counter("runnel_http_consumed_records_total", "Records consumed over HTTP (consume and stream)."),
		consumedBytes:   counter("runnel_http_consumed_bytes_total", "Key, value and header bytes consumed over HTTP."),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.duration, m.producedRecords, m.producedBytes, m.consumedRecords, m.consumedBytes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	return m, nil
}

func counter(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"topic"})
}

func (m *metrics) observe(route, method string, status int, d time.Duration) {
	if method == http.MethodGet && route == "/v1/topics/{topic}/records/stream" {
		return // a stream lasts as long as the client stays: not a latency
	}
	m.duration.WithLabelValues(route, method, strconv.Itoa(status)).Observe(d.Seconds())
}

func (m *metrics) produced(topic string, records int, bytes int64) {
	m.producedRecords.WithLabelValues(topic).Add(float64(records))
	m.producedBytes.WithLabelValues(topic).Add(float64(bytes))
}

func (m *metrics) consumed(topic string, records int, bytes int64) {
	if records == 0 {
		return
	}
	m.consumedRecords.WithLabelValues(topic).Add(float64(records))
	m.consumedBytes.WithLabelValues(topic).Add(float64(bytes))
}
