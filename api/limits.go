package api

// Limits bound what one node holds for HTTP clients, so no client (or few)
// can exhaust its memory or its goroutines. Zero fields take the defaults.
type Limits struct {
	// MaxProduceRecords caps the records of one produce request (413
	// too-many-records above). Decoding keeps a fixed-size entry per record
	// whatever its bytes, so the count, not only the body size, bounds what
	// a request costs.
	MaxProduceRecords int
}

// DefaultLimits are the limits of a node started without flags.
var DefaultLimits = Limits{
	MaxProduceRecords: DefaultMaxProduceRecords,
}

// DefaultMaxProduceRecords is Limits.MaxProduceRecords' default.
const DefaultMaxProduceRecords = 10000

func (l Limits) withDefaults() Limits {
	if l.MaxProduceRecords <= 0 {
		l.MaxProduceRecords = DefaultLimits.MaxProduceRecords
	}
	return l
}
