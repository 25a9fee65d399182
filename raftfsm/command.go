package raftfsm

import (
	"encoding/json"
	"fmt"
)

// EncodeCommand is the raft log encoding of a command: its JSON.
func EncodeCommand(c Command) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("raftfsm: encode command: %w", err)
	}
	return b, nil
}

// DecodeCommand decodes a command from raft log bytes and checks the
// envelope (a known version and exactly one command set) and the command
// against the hard bounds (checkCommand): the FSM applies nothing else.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if err := json.Unmarshal(b, &c); err != nil {
		return Command{}, fmt.Errorf("%w: decode: %v", ErrInvalidCommand, err)
	}
	if err := c.Check(); err != nil {
		return Command{}, err
	}
	return c, nil
}

// Check checks the envelope and the command against the hard bounds: what
// the FSM checks again at apply, so a proposer can refuse early.
func (c *Command) Check() error {
	if c.Version != CommandVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrInvalidCommand, c.Version, CommandVersion)
	}
	if n := c.count(); n != 1 {
		return fmt.Errorf("%w: %d commands in one envelope, want 1", ErrInvalidCommand, n)
	}
	return checkCommand(c)
}

func (c *Command) count() int {
	n := 0
	for _, set := range []bool{
		c.CreateTopic != nil, c.DeleteTopic != nil, c.AlterConfigs != nil,
		c.CreatePartitions != nil, c.RegisterBroker != nil, c.SetBrokerState != nil,
		c.ChangePartition != nil, c.AllocateProducerIDs != nil, c.InitCluster != nil,
		c.ChangePartitions != nil, c.ReassignPartition != nil,
		c.UpsertUserScram != nil, c.DeleteUser != nil, c.CreateACLs != nil, c.DeleteACLs != nil,
		c.CreateToken != nil, c.DeleteToken != nil, c.SetQuotas != nil,
	} {
		if set {
			n++
		}
	}
	return n
}
