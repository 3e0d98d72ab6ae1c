package engine

// ReshapeHook, when set (the test build sets it from its environment), is
// called at the points of a reshape where crash tests kill the process:
// "move" before each window is moved (pos is reshape_progress, the array
// sector the window starts at, total the new geometry's array sectors;
// no lock is held and user I/O runs), "checkpoint" before the
// superblocks record reshape_position (pos is the position about to be
// recorded, recorded the one the superblocks hold; the metadata lock is
// held) and "finish" before the superblocks of the finished reshape are
// written (I/O suspended). It may block for good.
var ReshapeHook func(point string, pos, recorded, total uint64)

func reshapeStep(point string, pos, recorded, total uint64) {
	if ReshapeHook != nil {
		ReshapeHook(point, pos, recorded, total)
	}
}
