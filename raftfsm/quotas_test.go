package raftfsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// Quotas are set, replaced, removed by empty values, survive a reopen and a
// snapshot; bad commands are refused before they apply.
func TestFSMQuotas(t *testing.T) {
	dir := t.TempDir()
	f := newTestFSM(t, dir)
	alice := QuotaEntity{User: "alice"}
	aliceApp := QuotaEntity{User: "alice", ClientID: "app"}
	defUser := QuotaEntity{UserDefault: true}
	for i, c := range []Command{
		{SetQuotas: &SetQuotas{Quotas: []Quota{{Entity: alice, Values: map[string]float64{"producer_byte_rate": 1 << 20}}}}},
		{SetQuotas: &SetQuotas{Quotas: []Quota{
			{Entity: aliceApp, Values: map[string]float64{"consumer_byte_rate": 2048}},
			{Entity: defUser, Values: map[string]float64{"request_percentage": 50}},
		}}},
		{SetQuotas: &SetQuotas{Quotas: []Quota{{Entity: alice, Values: map[string]float64{"producer_byte_rate": 5000}}}}},
		{SetQuotas: &SetQuotas{Quotas: []Quota{{Entity: defUser}}}},
		// A merge changes the values the log holds by then: it keeps
		// consumer_byte_rate, drops nothing else and adds a key.
		{SetQuotas: &SetQuotas{Quotas: []Quota{{Entity: aliceApp, Merge: true, Values: map[string]float64{"request_percentage": 10}}}}},
		{SetQuotas: &SetQuotas{Quotas: []Quota{{Entity: aliceApp, Merge: true, Remove: []string{"request_percentage"},
			Values: map[string]float64{"producer_byte_rate": 7}}}}},
	} {
		if res := applyAt(t, f, uint64(i+1), c); res != nil {
			t.Fatalf("apply %d: %v", i, res)
		}
	}
	img, _ := f.Image()
	if len(img.Quotas) != 2 || img.Quotas[alice.Key()].Values["producer_byte_rate"] != 5000 ||
		img.Quotas[aliceApp.Key()].Values["consumer_byte_rate"] != 2048 ||
		img.Quotas[aliceApp.Key()].Values["producer_byte_rate"] != 7 || len(img.Quotas[aliceApp.Key()].Values) != 2 {
		t.Fatalf("quotas: %+v", img.Quotas)
	}
	if alice.Key() == aliceApp.Key() || defUser.Key() == (QuotaEntity{User: "\x01"}).Key() {
		t.Fatal("entity keys collide")
	}
	data := snapshotBytes(t, f)
	for _, bad := range []Quota{
		{Entity: QuotaEntity{}, Values: map[string]float64{"producer_byte_rate": 1}},
		{Entity: alice, Values: map[string]float64{"bytes": 1}},
		{Entity: alice, Values: map[string]float64{"producer_byte_rate": -1}},
		{Entity: QuotaEntity{User: "a", UserDefault: true}, Values: map[string]float64{"producer_byte_rate": 1}},
		{Entity: QuotaEntity{User: "a\x00b"}, Values: map[string]float64{"producer_byte_rate": 1}},
		{Entity: alice, Merge: true, Remove: []string{"bytes"}},
	} {
		cmd := Command{Version: CommandVersion, SetQuotas: &SetQuotas{Quotas: []Quota{bad}}}
		enc, _ := EncodeCommand(cmd)
		if _, err := DecodeCommand(enc); !errors.Is(err, ErrInvalidCommand) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
	dst := newTestFSM(t, t.TempDir())
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	got, _ := dst.Image()
	if got.Digest() != img.Digest() || len(got.Quotas) != 2 {
		t.Fatalf("restored quotas: %+v", got.Quotas)
	}
}
