package quorum

import (
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// Only heartbeating, unfenced brokers of the session's epoch whose last
// heartbeat is older than the threshold are probed; a heartbeat during
// the probe, or a new epoch, calls the fence off.
func TestLateBrokers(t *testing.T) {
	img := emptyImage()
	img.Brokers[1] = &raftfsm.Broker{ID: 1, Epoch: 10, State: raftfsm.BrokerAlive, Heartbeats: true}
	img.Brokers[2] = &raftfsm.Broker{ID: 2, Epoch: 20, State: raftfsm.BrokerAlive, Heartbeats: true}
	img.Brokers[3] = &raftfsm.Broker{ID: 3, Epoch: 30, State: raftfsm.BrokerFenced, Heartbeats: true}
	img.Brokers[4] = &raftfsm.Broker{ID: 4, Epoch: 40, State: raftfsm.BrokerAlive}
	img.Brokers[5] = &raftfsm.Broker{ID: 5, Epoch: 51, State: raftfsm.BrokerAlive, Heartbeats: true}
	var s sessions
	t0 := time.Unix(1000, 0)
	s.touch(1, 1, 10, 0, "", t0, 0)                    // late
	s.touch(1, 2, 20, 0, "", t0.Add(2*time.Second), 0) // on time
	s.touch(1, 3, 30, 0, "", t0, 0)                    // fenced already
	s.touch(1, 4, 40, 0, "", t0, 0)                    // no heartbeats expected
	s.touch(1, 5, 50, 0, "", t0, 0)                    // an older epoch: registered again
	late := s.late(1, img, t0.Add(3*time.Second), 1500*time.Millisecond)
	if len(late) != 1 || late[img.Brokers[1]] != t0 {
		t.Fatalf("late %v, want broker 1 at %v", late, t0)
	}
	if s.heardSince(1, 1, 10, t0) {
		t.Fatal("no heartbeat since, yet heard")
	}
	s.touch(1, 1, 10, 0, "", t0.Add(3*time.Second), 0)
	if !s.heardSince(1, 1, 10, t0) {
		t.Fatal("a heartbeat came after the probe started, not heard")
	}
	s.touch(1, 1, 11, 0, "", t0.Add(3*time.Second), 0)
	if !s.heardSince(1, 1, 10, t0.Add(5*time.Second)) {
		t.Fatal("a new epoch does not call the old one's fence off")
	}
	if len(s.late(2, img, t0.Add(time.Hour), time.Second)) != 0 {
		t.Fatal("a new term's brokers are late before they have a session")
	}
}

// One probe per broker at a time, and at most one per interval.
func TestBrokerProbesBounded(t *testing.T) {
	var p brokerProbes
	t0 := time.Unix(1000, 0)
	if !p.start(1, t0, time.Second) || p.start(1, t0.Add(2*time.Second), time.Second) {
		t.Fatal("a second probe of broker 1 started while one runs")
	}
	if !p.start(2, t0, time.Second) {
		t.Fatal("broker 2's probe waits for broker 1's")
	}
	p.done(1)
	if p.start(1, t0.Add(500*time.Millisecond), time.Second) {
		t.Fatal("broker 1 probed twice within an interval")
	}
	if !p.start(1, t0.Add(time.Second), time.Second) {
		t.Fatal("broker 1 not probed again an interval later")
	}
}

// emptyImage is an image with no metadata and its maps allocated.
func emptyImage() *raftfsm.Image {
	return &raftfsm.Image{Brokers: map[int32]*raftfsm.Broker{}, Users: map[string]*raftfsm.User{}, ACLs: map[string]raftfsm.ACLEntry{}, Tokens: map[string]*raftfsm.Token{}, Quotas: map[string]raftfsm.Quota{}}
}
