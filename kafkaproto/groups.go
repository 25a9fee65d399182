package kafkaproto

// isGroupKey reports the API keys whose handlers read clientOf.
func isGroupKey(key int16) bool {
	return key == joinGroupKey || key == describeGroupsKey || key == listTransactionsKey
}

// coordinator returns the broker's GroupCoordinator, or nil.
func (s *Server) coordinator() GroupCoordinator {
	gc, _ := s.broker.(GroupCoordinator)
	return gc
}

// errNoCoordinator is what group APIs answer when the broker has none.
var errNoCoordinator = ErrCoordinatorNotAvailable
