package daemon

import (
	"mdtool/engine"
)

// openLaunched starts the engine on the opened members: from their
// superblocks, or from lc.Build for an array without superblocks.
func openLaunched(lc *LaunchConfig, edevs []engine.Device) (*engine.Array, error) {
	if lc.Build != nil {
		opts := launchOptions(lc)
		if err := openBitmapFile(lc, &opts); err != nil { // mdadm -B --bitmap=FILE
			return nil, err
		}
		return engine.OpenBuild(edevs, *lc.Build, opts)
	}
	return openWithBackup(lc, edevs)
}

// buildStatus fills what Status takes from the superblocks for an array
// without them: md's own numbers (GET_ARRAY_INFO of a non-persistent
// array), no superblock.
func buildStatus(st *Status, a *engine.Array) {
	st.NotPersistent = true
	st.Layout = a.BuiltLayout()
	if p := a.BitmapFile(); p != "" { // GET_BITMAP_FILE: mdadm -B --bitmap=FILE
		st.Bitmap, st.BitmapFile = true, p
	}
}

// refuseBuilt refuses, on an array without superblocks, the operations
// that would write metadata or change the geometry (grow rewrites them):
// not handled for build arrays. Fail, remove, --add (a spare with no
// superblock, as md's ADD_NEW_DISK of a non-persistent array), --re-add
// (build_readd.go), sync actions, read-only switches, a raid1's number of
// mirrors (raid1_reshape; md_update_sb writes nothing), the component
// and array sizes (no superblock to record them in) and bitmap changes
// (a bitmap file let go; an internal one refused as mdadm's load_super
// refuses it, grow_bitmap.go) run.
func (s *Service) refuseBuilt(op string) error {
	if s.cfg.Array.Persistent() {
		return nil
	}
	switch op {
	case OpReplace, OpReshape, OpLevel:
		return Errorf(CodeUnsupported, "%s: not supported on an array without superblocks", op)
	}
	return nil
}
