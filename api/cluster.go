package api

// BrokerList is GET /v1/brokers.
type BrokerList struct {
	Brokers []Broker `json:"brokers"`
}

// KafkaAPIVersions is GET /v1/kafka/api-versions.
type KafkaAPIVersions struct {
	APIVersions []KafkaAPIVersion `json:"api_versions"`
}
