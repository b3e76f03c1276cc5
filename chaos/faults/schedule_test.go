package faults

import (
	"reflect"
	"testing"
	"time"
)

func TestScheduleIsAFunctionOfTheSeed(t *testing.T) {
	p := Plan{Seed: 42, Traffic: 9 * time.Second, PerRun: 3}
	a, b := Schedule(p), Schedule(p)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two schedules of seed 42 differ:\n%v\n%v", a, b)
	}
	p.Seed = 43
	if reflect.DeepEqual(a, Schedule(p)) {
		t.Errorf("seeds 42 and 43 give the same schedule %v", a)
	}
}

func TestScheduleFitsAndDoesNotOverlap(t *testing.T) {
	for seed := range int64(200) {
		p := Plan{Seed: seed, Traffic: 9 * time.Second, PerRun: 3}
		fs := Schedule(p)
		if len(fs) == 0 {
			t.Fatalf("seed %d: no fault fits in %v", seed, p.Traffic)
		}
		var end time.Duration
		for _, f := range fs {
			if f.At < end {
				t.Errorf("seed %d: %v starts before the previous fault ends (%v)", seed, f, end)
			}
			end = f.At + f.Hold
			if end > p.Traffic-time.Second {
				t.Errorf("seed %d: %v ends after %v", seed, f, p.Traffic-time.Second)
			}
		}
	}
}

func TestConsecutiveSeedsCoverEveryKind(t *testing.T) {
	seen := map[Kind]bool{}
	for seed := int64(7); seed < 10; seed++ {
		for _, f := range Schedule(Plan{Seed: seed, Traffic: time.Minute, PerRun: 3}) {
			seen[f.Kind] = true
		}
	}
	if len(seen) != len(Kinds) {
		t.Errorf("three consecutive seeds planned kinds %v, want all %d", seen, len(Kinds))
	}
}

// TestNetSchedule: three consecutive seeds plan every kind of the network
// (TestNetChaosShort's runs), each with its parameters in range.
func TestNetSchedule(t *testing.T) {
	seen := map[Kind]bool{}
	for seed := int64(1); seed < 4; seed++ {
		for _, f := range Schedule(Plan{Seed: seed, Traffic: time.Minute, PerRun: 3, Kinds: NetKinds}) {
			seen[f.Kind] = true
			switch {
			case f.Kind == Loss && (f.LossPct < 20 || f.LossPct > 100),
				f.Kind == Delay && (f.Delay < 50*time.Millisecond || f.Delay > 350*time.Millisecond),
				f.Kind == Flap && (f.FlapPeriod < 200*time.Millisecond || f.FlapPeriod > 800*time.Millisecond):
				t.Errorf("seed %d: %v out of range", seed, f)
			}
		}
	}
	if len(seen) != len(NetKinds) {
		t.Errorf("three consecutive seeds planned kinds %v, want all %d of NetKinds", seen, len(NetKinds))
	}
	if k, err := ParseKinds("net"); err != nil || !reflect.DeepEqual(k, NetKinds) {
		t.Errorf(`ParseKinds("net") = %v, %v; want NetKinds`, k, err)
	}
	if k, err := ParseKinds("loss,delay,flap"); err != nil || !reflect.DeepEqual(k, []Kind{Loss, Delay, Flap}) {
		t.Errorf(`ParseKinds("loss,delay,flap") = %v, %v`, k, err)
	}
}

func TestParseKinds(t *testing.T) {
	if k, err := ParseKinds("all"); err != nil || len(k) != len(Kinds) {
		t.Errorf(`ParseKinds("all") = %v, %v; want every kind`, k, err)
	}
	if k, err := ParseKinds("kill, split"); err != nil || !reflect.DeepEqual(k, []Kind{Kill, Split}) {
		t.Errorf(`ParseKinds("kill, split") = %v, %v; want [kill split]`, k, err)
	}
	if _, err := ParseKinds("meteor"); err == nil {
		t.Error(`ParseKinds("meteor"): got no error, want one`)
	}
}
