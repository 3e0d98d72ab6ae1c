package mdvm

import (
	"context"
	"testing"
)

func TestJobs(t *testing.T) {
	for _, c := range []struct {
		jobs, ci string
		want     int
	}{
		{"", "", 1}, {"", "true", 2}, {"3", "", 3}, {"2", "true", 2}, {"1", "true", 1}, {"0", "true", 2}, {"0", "", 1}, {"x", "", 1}, {"-2", "", 1},
	} {
		t.Setenv(JobsEnv, c.jobs)
		t.Setenv("CI", c.ci)
		if got := Jobs(); got != c.want {
			t.Errorf("MDTOOL_VM_JOBS=%q CI=%q: Jobs() = %d, want %d", c.jobs, c.ci, got, c.want)
		}
	}
}

// Two slots: a third guest waits until one is given back; a waiter whose
// context ends gets its error and no slot.
func TestSlotPool(t *testing.T) {
	p := make(slotPool, 2)
	r1, err := p.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := p.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		r, err := p.acquire(ctx)
		if r != nil {
			r()
		}
		got <- err
	}()
	cancel()
	if err := <-got; err == nil {
		t.Fatal("a third slot was handed out while two were taken")
	}
	r1()
	r3, err := p.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 2 {
		t.Fatalf("%d slots taken, want 2", len(p))
	}
	r2()
	r3()
	if len(p) != 0 {
		t.Fatalf("%d slots still taken after every release", len(p))
	}
	if _, err := p.acquire(ctx); err == nil {
		t.Fatal("an ended context got a slot")
	}
}
