package servertest

// ChaosResult is one chaos scenario run (server/e2e_chaos_test.go), the
// JSON line it appends to RUNNEL_CHAOS_RESULTS and scripts/chaostable
// reads back into README's table: one type for the writer and the reader.
type ChaosResult struct {
	Scenario      string  `json:"scenario"`
	Seconds       float64 `json:"seconds"`
	Faults        int     `json:"faults"`
	Acked         int     `json:"acked"`
	Lost          int     `json:"lost"`
	Duplicated    int     `json:"duplicated"`
	OrderBroken   int     `json:"order_broken"`
	AckedOne      int     `json:"acked_acks1"`
	LostOne       int     `json:"lost_acks1"`
	ConsumerGaps  int     `json:"consumer_gaps"`
	ConsumerDups  int     `json:"consumer_dups"`
	DirtyReads    int     `json:"dirty_reads"`
	DataLossSeen  int     `json:"data_loss_reports"`
	ReplicasEqual bool    `json:"replicas_identical"`
	EpochsOrdered bool    `json:"epochs_non_decreasing"`
	DigestsEqual  bool    `json:"metadata_digests_equal"`
	Unavailable   float64 `json:"max_unavailable_seconds"`
}
