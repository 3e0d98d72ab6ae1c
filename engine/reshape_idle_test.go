package engine

import "testing"

// TestReshapeIdleStarts: writing "idle" to an array whose reshape waits
// (frozen while grow set it up) starts the reshape at once, as md's
// action_store sets MD_RECOVERY_NEEDED: sync_action reads "reshape" right
// after, so that mdadm --wait straight after grow waits for it.
func TestReshapeIdleStarts(t *testing.T) {
	mems := create(t, spec{level: "raid5", n: 4, chunkKiB: 64, devMiB: []int{8}})
	a := open(t, mems, DefaultOptions())
	defer a.Close()
	if err := a.StartAction(ActionFrozen); err != nil {
		t.Fatal(err)
	}
	if err := a.StartReshape(ReshapeStart{ChunkSectors: 256}); err != nil {
		t.Fatal(err)
	}
	if st := a.SyncStatus(); st.Action != ActionFrozen {
		t.Fatalf("frozen reshape: sync action %q", st.Action)
	}
	if err := a.StartAction(ActionIdle); err != nil {
		t.Fatal(err)
	}
	if st := a.SyncStatus(); st.Action != ActionReshape && a.reshaping() {
		t.Fatalf("after idle: sync action %q while the reshape waits", st.Action)
	}
	waitSync(t, a)
	if a.reshaping() {
		t.Fatal("the reshape did not end")
	}
}
