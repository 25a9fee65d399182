// The steps of a node's start after its listeners: the bounded wait for
// the metadata quorum (startContext), the broker's registration and open
// (startBroker), and the Kafka doors' serving goroutines.

package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nuid"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/broker/producers"
)

// startTimeout bounds how long a node waits for the quorum at start.
const startTimeout = 60 * time.Second

// startContext bounds a step of the start: startTimeout, or until the
// metadata log fails (quorum.Node.Failed). A node whose log cannot be
// written while it starts (a leader's first append after a restart) would
// otherwise wait out the timeout, or for ever where a step retries, before
// Run watches Failed. stop ends the watch and waits for it.
func (s *Server) startContext() (ctx context.Context, stop func()) {
	timed, cancelTimed := context.WithTimeout(context.Background(), startTimeout)
	ctx, cancel := context.WithCancelCause(timed)
	done, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-s.meta.Failed():
			cancel(fmt.Errorf("metadata log: %w", s.meta.Failure()))
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		<-watched
		cancel(nil)
		cancelTimed()
	}
}

// startError is err, or the metadata log's failure when that ended ctx
// (startContext): the reason the start failed, not the wait it cut short.
func startError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && ctx.Err() == context.Canceled {
		return cause
	}
	return err
}

func (s *Server) raftAdvertised() string {
	return advertised(s.cfg.RaftAdvertisedAddr, s.cfg.RaftAddr)
}

// serveKafka runs serve (the client or the inter-broker door) on ln.
func (s *Server) serveKafka(ln net.Listener, serve func(context.Context, net.Listener) error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := serve(context.Background(), ln); err != nil && !errors.Is(err, kafkaproto.ErrServerClosed) {
			s.logger.Error("Kafka listener stopped", "err", err)
		}
	}()
}

// startBroker registers this broker with the controller (which then expects
// its heartbeats) and opens the partitions placed on it.
func (s *Server) startBroker(ctx context.Context) error {
	_, err := s.meta.RegisterBroker(ctx, raftfsm.RegisterBroker{
		ID:            s.cfg.NodeID,
		IncarnationID: nuid.Next(),
		Rack:          s.cfg.Rack,
		HTTPAddr:      advertised(s.cfg.HTTPAdvertisedAddr, s.cfg.HTTPAddr),
		KafkaAddr:     advertised(s.cfg.KafkaAdvertisedAddr, s.cfg.KafkaAddr),
		KafkaTLSAddr:  advertised(s.cfg.KafkaTLSAdvertisedAddr, s.cfg.KafkaTLSAddr),
		RaftAddr:      s.raftAdvertised(),
	})
	if err != nil {
		return fmt.Errorf("register broker %d: %w", s.cfg.NodeID, err)
	}
	// A registered broker starts fenced; it serves once the controller has
	// seen it catch up with the metadata and unfenced it.
	if err := s.waitBrokerState(ctx, raftfsm.BrokerAlive); err != nil {
		return fmt.Errorf("wait for broker %d to be unfenced: %w", s.cfg.NodeID, err)
	}
	maxFiles, warn := segmentFileBudget(s.cfg, descriptorLimit())
	if warn != "" {
		s.logger.Warn(warn)
	}
	files := segments.NewFileCache(maxFiles)
	b, err := broker.New(broker.Config{
		NodeID: s.cfg.NodeID, DataDir: s.cfg.DataDir, Files: files,
		Tails: segments.NewTailCache(s.cfg.LogTailCacheBytes, 0), Logger: s.logger.With("component", "broker"),
		ReplicaLagMax: s.cfg.ReplicaLagMax, DialLeader: s.dialBroker,
		StorageRetry: s.cfg.StorageRetryInterval, Storage: s.storage,
		MaxInflated: s.cfg.MaxDecompressedBatchBytes, FramingOnly: s.cfg.BenchSkipRecordValidation,
		Lease: s.meta.BrokerLeaseValid, MinFreeDisk: s.cfg.MinFreeDisk,
		Now: s.faults.now, FS: s.faults.fs(),
		LogIdleTimeout: s.cfg.LogIdleTimeout, HighWatermarkCheckpointInterval: s.cfg.HighWatermarkCheckpointInterval,
		Producers: &producers.Policy{
			Expiration: cmp.Or(s.cfg.ProducerIDExpiration, producers.DefaultIDExpiration),
			MaxIDs:     cmp.Or(s.cfg.MaxProducerIDsPerPartition, producers.DefaultMaxIDsPerPartition),
			Allocated: func() (int64, <-chan struct{}) {
				img, changed := s.meta.Image()
				return img.NextProducerID, changed
			},
		},
		Keys: &producers.KeyPolicy{
			Expiration: cmp.Or(s.cfg.IdempotencyKeyExpiration, producers.DefaultKeyExpiration),
			MaxKeys:    cmp.Or(s.cfg.MaxIdempotencyKeysPerPartition, producers.DefaultMaxKeysPerPartition),
		},
	}, s.meta)
	if err != nil {
		return err
	}
	if warn := metadataDiskReserveWarning(b.Dir(), s.cfg.MinFreeDisk); warn != "" {
		s.logger.Warn(warn)
	}
	if err := b.Start(s.cfg.MaintainInterval); err != nil {
		b.Close()
		return fmt.Errorf("open partitions: %w", err)
	}
	s.broker = b
	return nil
}

// dialBroker connects to another broker's inter-broker Kafka port (the
// replica fetchers, transaction markers).
func (s *Server) dialBroker(ctx context.Context, id int32) (net.Conn, error) {
	conn, err := s.meta.DialNode(ctx, id, protoKafka)
	if err != nil {
		return nil, err
	}
	if err := writePeerHello(conn, s.cfg.NodeID); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// waitBrokerState waits until the metadata shows this broker in state.
func (s *Server) waitBrokerState(ctx context.Context, state raftfsm.BrokerState) error {
	for {
		img, changed := s.meta.Image()
		if b, ok := img.Brokers[s.cfg.NodeID]; ok && b.State == state {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
