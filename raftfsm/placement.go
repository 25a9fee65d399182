package raftfsm

import (
	"fmt"
	"slices"
)

// PlaceReplicas assigns n partitions of rf replicas over img's alive brokers.
// The brokers are ordered round-robin over racks (so neighbours sit on
// different racks), the first leader is the broker holding the fewest
// replicas (then leading the fewest partitions), and each partition's leader
// moves one step on. The replicas after the leader are the next brokers in
// that order on racks not used yet by the partition, then any unused broker. Deterministic for a given image.
func PlaceReplicas(img *Image, n int32, rf int16) ([][]int32, error) {
	if n < 1 || rf < 1 {
		return nil, fmt.Errorf("%w: %d partitions, replication factor %d", ErrInvalidPartitions, n, rf)
	}
	order := rackOrder(img)
	if int(rf) > len(order) {
		return nil, fmt.Errorf("%w: replication factor %d, %d alive brokers", ErrNotEnoughBrokers, rf, len(order))
	}
	start := leastLoaded(img, order)
	out := make([][]int32, n)
	for p := range out {
		first := (start + p) % len(order)
		out[p] = pickReplicas(img, order, first, int(rf))
	}
	return out, nil
}

// rackOrder lists the alive brokers by id, interleaved by rack.
func rackOrder(img *Image) []int32 {
	byRack := map[string][]int32{}
	var racks []string
	for id, b := range img.Brokers {
		if b.State != BrokerAlive {
			continue
		}
		if _, ok := byRack[b.Rack]; !ok {
			racks = append(racks, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], id)
	}
	slices.Sort(racks)
	total := 0
	for _, ids := range byRack {
		slices.Sort(ids)
		total += len(ids)
	}
	order := make([]int32, 0, total)
	for i := 0; len(order) < total; i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				order = append(order, byRack[r][i])
			}
		}
	}
	return order
}

// leastLoaded returns the position in order of the broker holding the
// fewest replicas, then leading the fewest partitions (the first such).
func leastLoaded(img *Image, order []int32) int {
	l := img.partitionLoad()
	replicas, leads := l.replicas, l.leaders
	best := 0
	for i, id := range order {
		b := order[best]
		if replicas[id] < replicas[b] || replicas[id] == replicas[b] && leads[id] < leads[b] {
			best = i
		}
	}
	return best
}

func pickReplicas(img *Image, order []int32, first, rf int) []int32 {
	r := []int32{order[first]}
	racks := map[string]bool{img.Brokers[order[first]].Rack: true}
	for pass := 0; pass < 2 && len(r) < rf; pass++ {
		for k := 1; k < len(order) && len(r) < rf; k++ {
			id := order[(first+k)%len(order)]
			rack := img.Brokers[id].Rack
			if slices.Contains(r, id) || (pass == 0 && racks[rack]) {
				continue
			}
			r = append(r, id)
			racks[rack] = true
		}
	}
	return r
}
