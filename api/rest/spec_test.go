package rest_test

import (
	"testing"

	"github.com/runnel/runnel/api/rest"
)

func TestSpecLoads(t *testing.T) {
	if _, _, err := rest.NewSpecRouter(); err != nil {
		t.Fatal(err)
	}
}
