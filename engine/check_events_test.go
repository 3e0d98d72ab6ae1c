package engine

import (
	"context"
	"testing"

	"mdtool/superblock"
)

// TestCheckEvents: a check or repair of a clean array counts events as md
// 6.1 does: md_do_sync records its progress 15 times (every 1/16, clean
// superblock updates that md_update_sb alternately bumps and rolls back:
// +1 in all), then two forced updates at its end (MD_SB_CHANGE_DEVS, and
// md_reap_sync_thread's md_update_sb(mddev, 1)): 3 more events, and
// resync_offset stays MaxSector.
func TestCheckEvents(t *testing.T) {
	for _, c := range []struct {
		s      spec
		repair bool
	}{
		{spec{level: "raid5", n: 3, chunkKiB: 512, devMiB: []int{20}}, false},
		{spec{level: "raid1", n: 2, devMiB: []int{20}}, false},
		{spec{level: "raid5", n: 3, chunkKiB: 512, devMiB: []int{20}}, true},
	} {
		a := open(t, create(t, c.s), recoverOptions())
		a.meta.mu.Lock()
		ev0, clean := a.meta.events, a.meta.inSync
		a.meta.mu.Unlock()
		if !clean {
			t.Fatalf("%s: not clean after open", c.s.level)
		}
		for round := 1; round <= 2; round++ {
			if _, err := a.Check(context.Background(), c.repair); err != nil {
				t.Fatal(err)
			}
			a.meta.mu.Lock()
			ev, cp := a.meta.events, a.meta.recoveryCP
			a.meta.mu.Unlock()
			if want := ev0 + 3*uint64(round); ev != want || cp != superblock.MaxSector {
				t.Fatalf("%s repair=%v: after check %d events %d (want %d), resync_offset %d", c.s.level, c.repair, round, ev, want, cp)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
