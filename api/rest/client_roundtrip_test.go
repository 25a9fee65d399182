package rest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/runnel/runnel/api/client"
)

// TestGeneratedClient drives the handler through the generated client: create
// a topic, produce, consume, and read a problem.
func TestGeneratedClient(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := client.NewClientWithResponses(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	parts := int32(2)
	cr, err := c.CreateTopicWithResponse(ctx, client.CreateTopicRequest{Name: "gen", Partitions: &parts})
	if err != nil || cr.StatusCode() != http.StatusCreated || cr.JSON201 == nil || len(cr.JSON201.Partitions) != 2 {
		t.Fatalf("create: %v %v", err, cr)
	}
	key, p := "k", int32(1)
	pr, err := c.ProduceRecordsWithResponse(ctx, "gen", nil, client.ProduceRecordsJSONRequestBody{
		Records: []client.ProduceRecord{{Key: &key, Value: map[string]any{"n": 1}, Partition: &p}}})
	if err != nil || pr.JSON200 == nil || len(pr.JSON200.Offsets) != 1 || pr.JSON200.Offsets[0].Partition != 1 {
		t.Fatalf("produce: %v %s", err, pr.Body)
	}
	off := "earliest"
	res, err := c.ConsumeRecordsWithResponse(ctx, "gen", 1, &client.ConsumeRecordsParams{Offset: &off})
	if err != nil || res.JSON200 == nil || len(res.JSON200.Records) != 1 {
		t.Fatalf("consume: %v %s", err, res.Body)
	}
	got := res.JSON200.Records[0]
	if *got.Key != "k" || got.Value.(map[string]any)["n"] != float64(1) || res.JSON200.NextOffset != 1 {
		t.Fatalf("consumed %+v", got)
	}
	dr, err := c.DescribeTopicWithResponse(ctx, "nope")
	if err != nil || dr.StatusCode() != 404 || dr.ApplicationproblemJSON404 == nil || dr.ApplicationproblemJSON404.Type != "urn:runnel:problem:unknown-topic" {
		t.Fatalf("describe unknown: %v %s", err, dr.Body)
	}
}
