package cmd

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"mdtool/internal/daemon"
)

// TestProgressLine compares the /proc/mdstat progress line with lines the
// Linux 6.1 kernel printed in the VM (mdadm 4.2, 64 MiB members, sync speed
// limited to 2000 KiB/s), given the same numbers.
func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		action            string
		doneKiB, totalKiB uint64
		speed             uint64
		want              string
	}{
		{"check", 9088, 63488, 3029, "[==>..................]  check = 13.6% (9088/63488) finish=0.2min speed=3029K/sec"},
		{"recover", 7344, 63488, 2448, "[==>..................]  recovery = 11.2% (7344/63488) finish=0.3min speed=2448K/sec"},
		{"recover", 62464, 64512, 2346, "[===================>.]  recovery = 96.0% (62464/64512) finish=0.0min speed=2346K/sec"},
		{"recover", 6272, 63488, 2090, "[=>...................]  recovery =  9.6% (6272/63488) finish=0.4min speed=2090K/sec"},
		// repair is shown as resync (md sets MD_RECOVERY_CHECK for check only).
		{"repair", 0, 63488, 0, "[>....................]  resync =  0.0% (0/63488) finish=66.1min speed=0K/sec"},
	} {
		st := &daemon.Status{SyncAction: tc.action, SyncDone: tc.doneKiB * 2, SyncTotal: tc.totalKiB * 2, SyncSpeed: tc.speed}
		if got := progressLine(st); got != tc.want {
			t.Errorf("%s %d/%d:\n got %q\nwant %q", tc.action, tc.doneKiB, tc.totalKiB, got, tc.want)
		}
	}
}

// TestDetailSyncText checks detail's lines for each sync action against
// what mdadm 4.2 printed for the kernel's arrays in the same state, and
// the JSON fields.
func TestDetailSyncText(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	devs := mkArray(t, dir, "/dev/md/ds", 4, 32<<20, "-l5", "-n4", "--assume-clean")
	s := serve(t, runDir, "/dev/md/ds", devs...)
	base, err := queryStatus(runDir, s.name)
	if err != nil {
		t.Fatal(err)
	}
	s.stop()
	for _, tc := range []struct {
		action string
		want   []string
	}{
		{"check", []string{"             State : clean, checking \n", "      Check Status : 13% complete\n" +
			"          Progress : [==>..................]  check = 13.6% (9088/63488) finish=0.2min speed=3029K/sec\n\n"}},
		{"recover", []string{"             State : clean, recovering \n", "    Rebuild Status : 13% complete\n"}},
		{"resync", []string{"             State : clean, resyncing \n", "     Resync Status : 13% complete\n"}},
		{"repair", []string{"             State : clean, resyncing \n", "     Resync Status : 13% complete\n"}},
		{"idle", []string{"             State : clean \n"}},
	} {
		st := *base
		st.SyncAction, st.SyncDone, st.SyncTotal, st.SyncSpeed = tc.action, 9088*2, 63488*2, 3029
		st.Mismatches, st.LastSyncAction = 8, "check"
		d, err := newDetailView(&st, "testhost")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		d.writeDetail(&b, "/dev/md/ds", false)
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: detail lacks %q:\n%s", tc.action, w, b.String())
			}
		}
		if tc.action == "idle" && strings.Contains(b.String(), "Status :") {
			t.Errorf("idle array with a Status line:\n%s", b.String())
		}
		j := d.json("/dev/md/ds")
		raw, _ := json.Marshal(j)
		var back map[string]any
		json.Unmarshal(raw, &back)
		sync, _ := back["sync"].(map[string]any)
		if sync["action"] != tc.action || sync["mismatch_cnt"] != float64(8) || sync["last_action"] != "check" {
			t.Errorf("%s: json sync %v", tc.action, sync)
		}
		if tc.action != "idle" && (sync["percent"] != 13.6 || sync["complete"] != float64(13) ||
			sync["done_sectors"] != float64(9088*2) || sync["speed_kib_per_second"] != float64(3029) ||
			sync["finish_seconds"] != float64(17) || !strings.Contains(sync["progress"].(string), "(9088/63488)")) {
			t.Errorf("%s: json sync %v", tc.action, sync)
		}
	}
	// Failed beyond redundancy: the reason is said.
	st := *base
	st.FailedReason = "2 of 4 members failed"
	d, _ := newDetailView(&st, "testhost")
	var b bytes.Buffer
	d.writeDetail(&b, "/dev/md/ds", false)
	if !strings.Contains(b.String(), "             State : clean \n     Failed Reason : 2 of 4 members failed\n") {
		t.Errorf("detail of a failed array:\n%s", b.String())
	}
	if j := d.json("/dev/md/ds"); j.FailedReason != st.FailedReason {
		t.Errorf("json failed_reason %q", j.FailedReason)
	}
}
