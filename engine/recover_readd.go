package engine

import (
	"fmt"

	"mdtool/engine/wib"
)

// reAddEvents is md 6.1's event rule for a device hot-added to a running
// array (super_1_validate, super_90_validate): with a bitmap, a device
// whose events are older than the bitmap's events_cleared is no former
// member (only the bitmap's bits since then are known); without one, a
// device that missed any event is no former member (nothing says what it
// missed), while one whose events are the array's goes back into its old
// role. md's ADD_NEW_DISK then refuses the hot-add that asked for the role
// (mdadm's attempt_re_add), and mdadm says "--re-add ... is not possible"
// (or --add goes on with a new spare). A faulty member that md still
// holds (faulty: "re-add" written to its dev-*/state) is checked for
// nothing: md clears Faulty and binds it again in its saved role.
func (a *Array) reAddEvents(ev uint64, faulty bool) error {
	if faulty {
		return nil
	}
	if !a.hasBM {
		if cur := a.Events(); ev < cur {
			return fmt.Errorf("%w: the array has no bitmap and the device's events %d are older than the array's %d",
				ErrNotReAddable, ev, cur)
		}
		return nil
	}
	b, ok := a.bm.(*wib.Bitmap)
	if !ok {
		return fmt.Errorf("%w: the bitmap is not running", ErrNotReAddable)
	}
	if h := b.Header(); ev < h.EventsCleared {
		return fmt.Errorf("%w: device events %d are older than the bitmap's events_cleared %d",
			ErrNotReAddable, ev, h.EventsCleared)
	}
	return nil
}
