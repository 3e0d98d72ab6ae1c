package engine

import "testing"

// dropMirrors as a takeoverStep's drop: fail and remove one member of
// each mirror pair of a near-2 raid10 first (mdadm's
// remove_disks_for_takeover), the odd role of the first pair and the
// even role of the others, so that the raid0 is made of both kinds.
const dropMirrors = -2

// dropMirrorHalves fails and removes those members, marking their
// device indexes in dropped.
func dropMirrorHalves(t *testing.T, a *Array, dropped map[int]bool) {
	t.Helper()
	for _, mi := range a.Members() {
		if mi.Device < 0 || mi.Role < 0 || (mi.Role < 2) != (mi.Role%2 == 1) {
			continue
		}
		if err := a.FailDevice(mi.Device); err != nil {
			t.Fatal(err)
		}
		if err := a.RemoveDevice(mi.Device); err != nil {
			t.Fatal(err)
		}
		dropped[mi.Device] = true
	}
}
