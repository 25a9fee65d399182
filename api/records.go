package api

// ProduceResponse is the answer to POST /v1/topics/{topic}/records.
type ProduceResponse struct {
	Offsets []RecordOffset `json:"offsets"`
}

// ConsumeResponse is the answer to GET .../partitions/{partition}/records.
type ConsumeResponse struct {
	Records       []ConsumedJSON `json:"records"`
	NextOffset    int64          `json:"next_offset"`
	HighWatermark int64          `json:"high_watermark"`
	StartOffset   int64          `json:"start_offset"`
}
