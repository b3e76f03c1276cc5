package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDelay: the zero value starts at Start, doubles up to Cap with at
// most a quarter of jitter, and is capped by Retry-After and remaining.
func TestDelay(t *testing.T) {
	var b Backoff
	want := []time.Duration{Start, 2 * Start, 4 * Start, Cap, Cap}
	for i, w := range want {
		d := b.Delay(0, time.Hour)
		if d > w || d < w-w/4 {
			t.Errorf("round %d: delay %v, want within (%v, %v]", i, d, w-w/4, w)
		}
	}
	if d := b.Delay(time.Millisecond, time.Hour); d != time.Millisecond {
		t.Errorf("a shorter Retry-After: delay %v, want 1ms", d)
	}
	if d := b.Delay(0, 2*time.Millisecond); d != 2*time.Millisecond {
		t.Errorf("little remaining: delay %v, want 2ms", d)
	}
	b.Reset()
	if d := b.Delay(0, time.Hour); d > Start {
		t.Errorf("after Reset: delay %v, want at most %v", d, Start)
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := Sleep(ctx, time.Millisecond); err != nil {
		t.Errorf("Sleep: %v", err)
	}
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with an ended context: %v, want context.Canceled", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(0) with an ended context: %v, want context.Canceled", err)
	}
}
