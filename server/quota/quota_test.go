package quota

import (
	"testing"
	"time"
)

func TestResolvePrecedence(t *testing.T) {
	q := func(e Entity, v float64) Quota {
		return Quota{Entity: e, Values: map[string]float64{ProducerByteRate: v}}
	}
	all := []Quota{
		q(Entity{ClientIDDefault: true}, 8),
		q(Entity{ClientID: "app"}, 7),
		q(Entity{UserDefault: true}, 6),
		q(Entity{UserDefault: true, ClientIDDefault: true}, 5),
		q(Entity{UserDefault: true, ClientID: "app"}, 4),
		q(Entity{User: "alice"}, 3),
		q(Entity{User: "alice", ClientIDDefault: true}, 2),
		q(Entity{User: "alice", ClientID: "app"}, 1),
	}
	// Removing the most specific entity each time exposes the next one.
	for i := len(all); i > 0; i-- {
		l, ok := NewTable(all[:i]).Resolve(ProducerByteRate, "alice", "app")
		if !ok || l.Rate != float64(len(all)-i+1) {
			t.Fatalf("with %d entities: %+v %v, want rate %d", i, l, ok, len(all)-i+1)
		}
	}
	// A default user quota is each user's own account; a named user's is shared by its clients.
	tab := NewTable([]Quota{q(Entity{UserDefault: true}, 6), q(Entity{User: "alice"}, 3)})
	if l, _ := tab.Resolve(ProducerByteRate, "bob", "x"); l.Account != (Account{ProducerByteRate, "bob", ""}) {
		t.Fatalf("bob: %+v", l)
	}
	if _, ok := tab.Resolve(ConsumerByteRate, "bob", "x"); ok {
		t.Fatal("a quota of another key applied")
	}
	if _, ok := NewTable(nil).Resolve(ProducerByteRate, "a", "b"); ok {
		t.Fatal("empty table resolved")
	}
}

func TestThrottlerConvergesToRate(t *testing.T) {
	now := time.Unix(1000, 0)
	th := NewThrottler()
	th.Now = func() time.Time { return now }
	l := Limit{Rate: 1000, Account: Account{Kind: ProducerByteRate, User: "a"}}
	// A client that sends 100 bytes and then waits out its throttle.
	sent, start := 0.0, now
	for now.Sub(start) < 20*time.Second {
		sent += 100
		d := th.Charge(l, 100)
		now = now.Add(d + time.Millisecond)
	}
	rate := sent / now.Sub(start).Seconds()
	if rate < 1000 || rate > 1100 {
		t.Fatalf("rate %.0f/s for a 1000/s quota", rate)
	}
	if th.Throttled(Limit{Rate: 1000, Account: Account{Kind: ProducerByteRate, User: "b"}}) != 0 {
		t.Fatal("another account is throttled")
	}
	// One huge request is throttled at most MaxThrottle.
	if d := th.Charge(l, 1e12); d > th.MaxThrottle {
		t.Fatalf("throttle %v", d)
	}
}

func TestMatches(t *testing.T) {
	e := Entity{User: "alice", ClientIDDefault: true}
	for _, c := range []struct {
		fs     []Filter
		strict bool
		want   bool
	}{
		{[]Filter{{Kind: "user", Match: "exact", Name: "alice"}}, false, true},
		{[]Filter{{Kind: "user", Match: "exact", Name: "alice"}}, true, false},
		{[]Filter{{Kind: "user", Match: "any"}, {Kind: "client-id", Match: "default"}}, true, true},
		{[]Filter{{Kind: "client-id", Match: "exact", Name: "x"}}, false, false},
		{[]Filter{{Kind: "user", Match: "default"}}, false, false},
	} {
		if got := Matches(e, c.fs, c.strict); got != c.want {
			t.Errorf("%+v strict=%v: %v", c.fs, c.strict, got)
		}
	}
}
