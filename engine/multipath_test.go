package engine

import (
	"strings"
	"testing"

	"mdtool/superblock"
)

// mpSuper reads the superblock on the disk behind the paths.
func mpSuper(t *testing.T, disk *MemDevice) *superblock.Superblock {
	t.Helper()
	head := make([]byte, 4096)
	if _, err := disk.Reopen().ReadAt(head, 4096); err != nil {
		t.Fatal(err)
	}
	sb, err := superblock.Parse(head)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// mpPath is one path to a disk: its own handle, whose Close leaves the
// disk open for the other paths.
type mpPath struct{ Device }

func (mpPath) Close() error { return nil }

func newPath(d Device) Device { return &mpPath{d} }

func mpRoles(a *Array) map[int]int {
	out := map[int]int{}
	for _, mi := range a.Members() {
		if mi.Device >= 0 && mi.State == InSync {
			out[mi.Device] = mi.Role
		}
	}
	return out
}

// TestMultipath: md's multipath personality over two paths to one disk
// (two handles of one memory device), as the kernel runs it: slots in
// the order of md's list (the device given last first), desc_nr in
// that order while the superblock keeps the dev_number it was loaded
// with, one superblock written per update (the list head's), a failed
// path disabled and the request retried on the next one, the last path
// never disabled, and a path added back in sync at once (no recovery)
// with the events md counts (two per --fail, one per --remove, two per
// --add).
func TestMultipath(t *testing.T) {
	mems := create(t, spec{level: "multipath", n: 2})
	disk := mems[1] // the superblock written last, as on one disk
	if sb := mpSuper(t, disk); sb.Level != superblock.LevelMultipath || sb.DevNumber != 1 || sb.ResyncOffset != superblock.MaxSector {
		t.Fatalf("created: level %d dev_number %d resync_offset %d", sb.Level, sb.DevNumber, sb.ResyncOffset)
	}
	fd := NewFaultDevice(newPath(disk), 1)
	o := testOptions()
	o.Name = "md1"
	logs := captureLog(&o)
	a, err := Open([]Device{newPath(disk), fd}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if r := mpRoles(a); r[1] != 0 || r[0] != 1 {
		t.Fatalf("slots by device %v, want device 1 in slot 0 (md's list head), device 0 in slot 1", r)
	}
	if d := a.DescNumbers(); d[0] != 1 || d[1] != 0 {
		t.Fatalf("desc_nr by device %v, want {0:1 1:0}", d)
	}
	m := newModel(a.Size())
	workload(t, a, m, 5, 40)
	if a.Events() != 0 {
		t.Errorf("events %d after writes, want 0 (multipath never goes active)", a.Events())
	}

	// The path in slot 0 fails on write: disabled, the write goes on
	// through the other path.
	fd.AddRule(FaultRule{Ops: OpWrite})
	p := make([]byte, 8192)
	fillPattern(newRand(6), p)
	if _, err := a.WriteAt(p, 1<<20); err != nil {
		t.Fatalf("write with one path failing: %v", err)
	}
	m.write(p, 1<<20)
	if !containsPrefix(logs(), "multipath: IO failure on ") || !containsPrefix(logs(), "multipath: Operation continuing on 1 IO paths.") {
		t.Errorf("no path failure lines: %q", logs())
	}
	checkContent(t, a, m)
	a.checkRecovery() // md's thread after md_error: the faulty path leaves its slot
	if a.Events() != 2 || a.Degraded() != 1 {
		t.Errorf("events %d degraded %d after the failure, want 2 and 1", a.Events(), a.Degraded())
	}
	// The failed path heads md's list: md_update_sb writes nothing.
	if sb := mpSuper(t, disk); sb.Events != 0 {
		t.Errorf("superblock after the list head failed: events %d, want 0 (not written)", sb.Events)
	}

	// The last path is never disabled.
	if err := a.FailDevice(0); err != nil {
		t.Errorf("--fail of the last path: %v, want nil (md's state store says nothing)", err)
	}
	if r := mpRoles(a); r[0] != 1 || !containsPrefix(logs(), "multipath: only one IO path left and IO error.") {
		t.Errorf("last path after --fail: slots %v, log %q", r, logs())
	}

	// Out and back in: in sync at once, in the free slot.
	if err := a.RemoveDevice(1); err != nil {
		t.Fatal(err)
	}
	if a.Events() != 3 {
		t.Errorf("events %d after --remove, want 3", a.Events())
	}
	// Now the other path heads the list: its superblock, with the
	// dev_number it was loaded with and the roles by desc_nr.
	sb := mpSuper(t, disk)
	if sb.Events != 3 || sb.DevNumber != 1 || sb.DevRoles[1] != 1 || sb.DevRoles[0] != superblock.RoleSpare {
		t.Errorf("superblock after --remove: events %d dev_number %d roles %x, want 3, 1 (as loaded), [spare 1]", sb.Events, sb.DevNumber, sb.DevRoles[:2])
	}
	idx, err := a.AddDevice(newPath(disk), AddOptions{Replacement: -1})
	if err != nil {
		t.Fatal(err)
	}
	if r := mpRoles(a); r[idx] != 0 || r[0] != 1 {
		t.Errorf("slots after --add: %v, want the new path in slot 0", r)
	}
	if a.Events() != 5 || a.Degraded() != 0 {
		t.Errorf("events %d degraded %d after --add, want 5 and 0", a.Events(), a.Degraded())
	}
	sb = mpSuper(t, disk)
	if sb.DevNumber != 2 || sb.DevRoles[2] != 0 || sb.DevRoles[1] != 1 || sb.DevRoles[0] != superblock.RoleSpare || sb.Events != 5 {
		t.Errorf("superblock after --add: dev_number %d roles %x events %d, want the new path's (2), [spare 1 0], 5", sb.DevNumber, sb.DevRoles[:3], sb.Events)
	}
	checkContent(t, a, m)
	for _, l := range logs() {
		if strings.Contains(l, "recovery") {
			t.Errorf("a recovery ran: %q", l)
		}
	}
}
