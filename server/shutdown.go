// A node's stop: Close, in the order the package doc gives, the broker's
// controlled shutdown and the HTTP servers' graceful stop.

package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// Close stops accepting work, lets in-flight requests finish, flushes every
// partition and stops the metadata node.
func (s *Server) Close() error {
	s.ready.Store(false)
	var errs []error
	// Where the exit's time went, logged at the end ("server closed"): a
	// controlled shutdown at 300,000 partitions moved its leaderships in
	// 3 s and exited 11 s after SIGTERM, 2.6 s of them closing the logs
	// (issue 19); the rest was not told apart.
	var steps []any
	last := time.Now()
	step := func(name string) {
		now := time.Now()
		steps = append(steps, name, now.Sub(last).Round(time.Millisecond))
		last = now
	}
	if s.broker != nil {
		s.controlledShutdown()
		step("controlled_shutdown")
	}
	if s.httpSrv != nil {
		errs = append(errs, s.stopHTTP())
		step("http")
	}
	if s.stopElections != nil {
		s.stopElections()
	}
	if s.interBroker != nil {
		s.interBroker.Close()
	}
	if s.kafka != nil {
		if err := s.kafka.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stop Kafka listener: %w", err))
		}
		step("kafka")
	}
	// The inter-node listeners end the hand-offs waiting on them (the HTTP
	// server closed interHTTP if it served it).
	if s.interHTTP != nil {
		s.interHTTP.Close()
	}
	if s.handoffs != nil {
		s.handoffs.close()
	}
	s.wg.Wait()
	step("inter_node")
	if s.txn != nil {
		s.txn.Close()
	}
	if s.groups != nil {
		s.groups.Close()
	}
	step("coordinators")
	// Nothing forwards any more (the HTTP servers and the coordinators
	// stopped): the forwarder's pooled connections to other nodes close.
	if s.forward != nil {
		s.forward.Close()
	}
	if s.broker != nil { // it logs "partition logs closed", with where the time went
		if err := s.broker.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close partitions: %w", err))
		}
		step("partitions")
	}
	if s.meta != nil {
		if err := s.meta.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close metadata node: %w", err))
		}
		step("metadata")
	}
	s.tls.Close()
	s.faults.close()
	if s.lock != nil {
		s.lock.Close()
	}
	s.logger.Info("server closed", steps...)
	return errors.Join(errs...)
}

// controlledShutdown asks the controller to move this broker's leaderships
// away before it stops serving them. Without a controller (the whole
// cluster stopping) there is no one to ask, and with no other live broker
// there is nowhere to move them: both skip it rather than wait for the
// deadline. A controller lost midway ends the wait too.
func (s *Server) controlledShutdown() {
	if s.meta.Status().LeaderID < 0 {
		s.logger.Info("controlled shutdown skipped: no active controller")
		return
	}
	img, _ := s.meta.Image()
	if !otherBrokerAlive(img, s.cfg.NodeID) {
		s.logger.Info("controlled shutdown skipped: no other live broker to take over")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout()/2)
	defer cancel()
	watched := make(chan struct{})
	go func() { // ends with ctx, waited for below
		defer close(watched)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if s.meta.Status().LeaderID < 0 {
					cancel()
					return
				}
			}
		}
	}()
	err := s.meta.ControlledShutdown(ctx)
	cancel()
	<-watched
	switch {
	case err == nil:
	case s.meta.Status().LeaderID < 0:
		s.logger.Info("controlled shutdown ended: the active controller is gone", "err", err)
	default:
		s.logger.Warn("controlled shutdown", "err", err)
	}
}

func otherBrokerAlive(img *raftfsm.Image, self int32) bool {
	for id, b := range img.Brokers {
		if id != self && b.State == raftfsm.BrokerAlive {
			return true
		}
	}
	return false
}

// stopHTTP lets in-flight requests finish; long polls and live-tail streams,
// which would otherwise hold the shutdown for their whole wait, are ended
// after a short grace through their request context.
//
// Each second of a wait past the grace is logged with what it waits for
// (httpwait.go), and such a wait's end with the time it took.
func (s *Server) stopHTTP() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout())
	defer cancel()
	start := time.Now()
	grace := time.AfterFunc(httpShutdownGrace, s.cancelRequests)
	defer grace.Stop()
	stopped, reported := make(chan struct{}), make(chan bool, 1)
	go func() { // ends when Shutdown returns, waited for below
		tick := time.NewTicker(httpShutdownGrace)
		defer tick.Stop()
		logged := false
		for {
			select {
			case <-stopped:
				reported <- logged
				return
			case <-tick.C:
				logged = true
				requests, conns := s.httpWaits.describe(time.Now())
				s.logger.Info("http server closing: waiting", "requests", requests, "connections", conns,
					"waited", time.Since(start))
			}
		}
	}()
	err := s.httpSrv.Shutdown(ctx)
	close(stopped)
	if <-reported {
		s.logger.Info("http server closed", "waited", time.Since(start))
	}
	if err != nil {
		s.httpSrv.Close()
		return fmt.Errorf("stop HTTP: %w", err)
	}
	return nil
}

const httpShutdownGrace = time.Second

func (s *Server) shutdownTimeout() time.Duration {
	if s.cfg.ShutdownTimeout > 0 {
		return s.cfg.ShutdownTimeout
	}
	return 20 * time.Second
}
