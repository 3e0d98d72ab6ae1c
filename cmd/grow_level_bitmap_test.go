package cmd

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mdtool/internal/daemon"
)

// TestLevelRAID0BitmapBusy: the daemon's level operation to raid0 on a
// parity-last raid5 that still has its bitmap (mdadm's way removes it
// first) is EBUSY, as md's raid0_takeover, before impose_level's
// removals: the array stays a raid5 of 3 with its bitmap; impose_level's
// text for an EBUSY with a bitmap is its second line.
func TestLevelRAID0BitmapBusy(t *testing.T) {
	if got := levelBusyBitmap(&daemon.Status{Bitmap: true}); got != "\n       Bitmap must be removed before level can be changed" {
		t.Errorf("impose_level's EBUSY line: %q", got)
	}
	if got := levelBusyBitmap(&daemon.Status{}); got != "" {
		t.Errorf("without a bitmap: %q", got)
	}
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	md := "/dev/md/lrb"
	devs := mkArray(t, dir, md, 3, 16<<20, "-l5", "-n3", "-c64", "--layout=parity-last", "--assume-clean", "--bitmap=internal")
	s := serve(t, runDir, md, devs...)
	defer s.stopIfRunning()
	cl, err := daemon.Dial(runDir, "lrb")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lv := 0
	_, err = cl.Call(ctx, daemon.Request{Op: daemon.OpLevel, Level: &lv})
	var oe *daemon.OpError
	if !errors.As(err, &oe) || oe.Code != daemon.CodeBusy {
		t.Fatalf("level 0 with a bitmap: %v, want CodeBusy", err)
	}
	d := detailJSONOf(t, runDir, md)
	if d["raid_level"] != "raid5" || d["raid_devices"] != float64(3) || d["active_devices"] != float64(3) {
		t.Errorf("after the refusal: level %v raid_devices %v active %v", d["raid_level"], d["raid_devices"], d["active_devices"])
	}
	s.stop()
	for _, p := range devs {
		if _, out, _ := mdtool(t, "examine", p); !strings.Contains(out, "Internal Bitmap") || !strings.Contains(out, "Raid Level : raid5") {
			t.Errorf("%s after the refusal:\n%s", p, out)
		}
	}
}
