package api_test

import (
	"testing"

	"github.com/runnel/runnel/api"
)

func TestSpecLoads(t *testing.T) {
	if _, _, err := api.NewSpecRouter(); err != nil {
		t.Fatal(err)
	}
}
