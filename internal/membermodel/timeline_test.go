package membermodel

import (
	"testing"
	"time"
)

func TestTimelineQueuesPerMember(t *testing.T) {
	var a, b Timeline
	d := 50 * time.Millisecond // long, so that preemption between the calls cannot matter
	t0 := time.Now()
	a1 := a.Reserve(d)
	a2 := a.Reserve(d)
	b1 := b.Reserve(d)
	if a1.Before(t0.Add(d)) {
		t.Errorf("first request done %v after submission, want >= %v", a1.Sub(t0), d)
	}
	if got := a2.Sub(a1); got != d {
		t.Errorf("second request on the same member done %v after the first, want %v (queued)", got, d)
	}
	if b1.After(a2) || b1.Sub(t0) >= 2*d {
		t.Errorf("request on another member done %v after submission, want < %v (members in parallel)", b1.Sub(t0), 2*d)
	}
	// An idle member starts a new request when it arrives, not when its
	// last one ended.
	var c Timeline
	c.Reserve(time.Microsecond)
	time.Sleep(time.Millisecond)
	t1 := time.Now()
	if c1 := c.Reserve(d); c1.Before(t1.Add(d)) {
		t.Errorf("request on an idle member done %v after submission, want >= %v", c1.Sub(t1), d)
	}
}

func TestWaitHoldsUntilDeadline(t *testing.T) {
	for _, d := range []time.Duration{0, 100 * time.Microsecond, time.Millisecond} {
		deadline := time.Now().Add(d)
		Wait(deadline)
		if now := time.Now(); now.Before(deadline) {
			t.Errorf("Wait(%v) returned %v early", d, deadline.Sub(now))
		}
	}
	Wait(time.Now().Add(-time.Second)) // a past deadline returns at once
}
