package admin

import (
	"fmt"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// errNoClusterAdmin answers cluster admin requests a Broker cannot serve.
var errNoClusterAdmin = fmt.Errorf("%w: this broker does not serve cluster admin requests", kapi.ErrInvalidRequest)

// clusterAdmin returns the broker's ClusterAdmin, or an error for
// requests that need one.
func clusterAdmin(env kapi.Env) (kapi.ClusterAdmin, error) {
	if ca, ok := env.Broker().(kapi.ClusterAdmin); ok {
		return ca, nil
	}
	return nil, errNoClusterAdmin
}
