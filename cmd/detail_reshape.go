package cmd

import (
	"fmt"
	"io"

	"mdtool/internal/daemon"
	"mdtool/superblock"
)

// reshapeInfo is what mdadm 4.2's Detail takes from a member's superblock
// (getinfo_super1) when it records a reshape: the change in devices, the
// new level, layout and chunk.
type reshapeInfo struct {
	position   uint64 // reshape_position, array sectors
	delta      int
	raidDisks  int // GET_ARRAY_INFO's raid_disks: the new count
	level      int // the array's (old) level, layout and chunk
	layout     int
	chunk      uint32 // bytes
	newLevel   int
	newLayout  int
	newChunk   uint32 // bytes
	backwards  bool
	newOffset  int32
	hasNewOffs bool
}

// reshapeSyncUnits turns the engine's reshape progress (array sectors of
// the new geometry) into md's: sync_completed and /proc/mdstat count a
// reshape in sectors per device (raid5.c reshape_request divides
// reshape_progress by the new data disks; the total is dev_sectors).
func reshapeSyncUnits(st *daemon.Status, sb *superblock.Superblock) *daemon.Status {
	if st.SyncAction != "reshape" || sb.FeatureMap&superblock.FeatureReshapeActive == 0 {
		return st
	}
	data := st.RaidDisks - 1
	if sb.NewLevel == superblock.LevelRAID6 {
		data--
	}
	if data <= 0 {
		return st
	}
	c := *st
	c.SyncDone /= uint64(data)
	c.SyncTotal /= uint64(data)
	c.SyncCheckpoint /= uint64(data)
	return &c
}

// reshape returns the reshape the superblock records, or nil.
func (d *detailView) reshape() *reshapeInfo {
	sb := d.sb
	if sb.FeatureMap&superblock.FeatureReshapeActive == 0 {
		return nil
	}
	return &reshapeInfo{
		position: sb.ReshapePosition, delta: int(sb.DeltaDisks), raidDisks: d.st.RaidDisks,
		level: d.st.Level, layout: int(sb.Layout), chunk: sb.ChunkSize * 512,
		newLevel: int(sb.NewLevel), newLayout: int(sb.NewLayout), newChunk: sb.NewChunk * 512,
		backwards:  sb.FeatureMap&superblock.FeatureReshapeBackwards != 0,
		newOffset:  sb.NewOffset,
		hasNewOffs: sb.FeatureMap&superblock.FeatureNewOffset != 0,
	}
}

// writeReshape prints mdadm 4.2 Detail's reshape block ("Delta Devices",
// "New Level", "New Layout", "New Chunksize" where they differ) and the
// blank line after it.
func (r *reshapeInfo) write(w io.Writer) {
	if r.delta != 0 {
		fmt.Fprintf(w, "     Delta Devices : %d, (%d->%d)\n", r.delta, r.raidDisks-r.delta, r.raidDisks)
	}
	if r.newLevel != r.level {
		fmt.Fprintf(w, "         New Level : %s\n", levelName(r.newLevel))
	}
	if r.newLevel != r.level || r.newLayout != r.layout {
		if n, ok := r.newLayoutName(); ok {
			fmt.Fprintf(w, "        New Layout : %s\n", n)
		}
	}
	if r.newChunk != r.chunk {
		fmt.Fprintf(w, "     New Chunksize : %dK\n", r.newChunk/1024)
	}
	fmt.Fprintf(w, "\n")
}

// newLayoutName is the "New Layout" text: raid5/6 by mdadm's name
// tables, raid10 as near=N, far|offset=N; other levels print none.
func (r *reshapeInfo) newLayoutName() (string, bool) {
	switch r.newLevel {
	case superblock.LevelRAID5, superblock.LevelRAID6:
		n, _ := layoutName(r.newLevel, uint32(r.newLayout), false)
		return n, true
	case superblock.LevelRAID10:
		kind := "far"
		if r.newLayout&0x10000 != 0 {
			kind = "offset"
		}
		return fmt.Sprintf("near=%d, %s=%d", r.newLayout&255, kind, (r.newLayout>>8)&255), true
	}
	return "", false
}

// detailJSONReshape is the "reshape" object of detail --json while the
// superblocks record a reshape.
type detailJSONReshape struct {
	PositionSectors uint64 `json:"position_sectors"`
	DeltaDevices    int    `json:"delta_devices"`
	FromDevices     int    `json:"from_devices"`
	ToDevices       int    `json:"to_devices"`
	NewLevel        string `json:"new_level"`
	NewLayout       string `json:"new_layout,omitempty"`
	NewChunkKiB     uint32 `json:"new_chunk_kib"`
	Backwards       bool   `json:"backwards"`
	// NewOffsetSectors is new_offset (the move of data_offset) when the
	// reshape moves it.
	NewOffsetSectors *int32 `json:"new_offset_sectors,omitempty"`
}

func (r *reshapeInfo) json() *detailJSONReshape {
	j := &detailJSONReshape{PositionSectors: r.position, DeltaDevices: r.delta,
		FromDevices: r.raidDisks - r.delta, ToDevices: r.raidDisks,
		NewLevel: levelName(r.newLevel), NewChunkKiB: r.newChunk / 1024, Backwards: r.backwards}
	if n, ok := r.newLayoutName(); ok {
		j.NewLayout = n
	}
	if r.hasNewOffs {
		o := r.newOffset
		j.NewOffsetSectors = &o
	}
	return j
}
