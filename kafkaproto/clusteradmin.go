package kafkaproto

import (
	"fmt"
)

// errNoClusterAdmin answers cluster admin requests a Broker cannot serve.
var errNoClusterAdmin = fmt.Errorf("%w: this broker does not serve cluster admin requests", ErrInvalidRequest)

// clusterAdmin returns the broker's ClusterAdmin, or an error for
// requests that need one.
func (s *Server) clusterAdmin() (ClusterAdmin, error) {
	if ca, ok := s.broker.(ClusterAdmin); ok {
		return ca, nil
	}
	return nil, errNoClusterAdmin
}
