package plan

import "testing"

// TestMaps checks mdadm's tables through MapNum, MapName and MapNameFold:
// the first name of a number is the printed one, map_name is
// case-sensitive, the mdadm.conf reader's lookup is not.
func TestMaps(t *testing.T) {
	for _, c := range []struct {
		t    []Mapping
		num  int
		name string
	}{
		{PersTable, LevelRAID1, "raid1"},
		{PersTable, LevelRAID0, "raid0"},
		{PersTable, LevelLinear, "linear"},
		{PersTable, LevelMultipath, "multipath"},
		{PersTable, LevelContainer, "container"},
		{R5LayoutTable, LayoutLeftSymmetric, "left-symmetric"},
		{R6LayoutTable, LayoutDDFNRestart, "ddf-N-restart"},
		{R6LayoutTable, LayoutParityFirst6, "parity-first-6"},
		{R0LayoutTable, RAID0LayoutDangerous, "dangerous"},
	} {
		if got, ok := MapNum(c.t, c.num); !ok || got != c.name {
			t.Errorf("MapNum(%d) = %q, %v; want %q", c.num, got, ok, c.name)
		}
	}
	if _, ok := MapNum(PersTable, 3); ok {
		t.Error("MapNum(pers, 3) found a name")
	}
	if n, ok := MapName(PersTable, "mirror"); !ok || n != LevelRAID1 {
		t.Errorf("MapName(mirror) = %d, %v", n, ok)
	}
	if _, ok := MapName(PersTable, "MIRROR"); ok {
		t.Error("MapName is case-sensitive, found MIRROR")
	}
	if n, ok := MapNameFold(PersTable, "MIRROR"); !ok || n != LevelRAID1 {
		t.Errorf("MapNameFold(MIRROR) = %d, %v", n, ok)
	}
	if _, ok := MapNameFold(PersTable, "raid7"); ok {
		t.Error("MapNameFold(raid7) found something")
	}
	if n, ok := MapName(R5LayoutTable, "ddf-N-restart"); !ok || n != LayoutLeftAsymmetric {
		t.Errorf("raid5 ddf-N-restart = %d, %v; mdadm maps it to left-asymmetric", n, ok)
	}
}
