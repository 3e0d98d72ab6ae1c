package daemon

import (
	"mdtool/engine"
)

// openLaunched starts the engine on the opened members: from their
// superblocks, or from lc.Build for an array without superblocks.
func openLaunched(lc *LaunchConfig, edevs []engine.Device) (*engine.Array, error) {
	if lc.Build != nil {
		return engine.OpenBuild(edevs, *lc.Build, launchOptions(lc))
	}
	return engine.Open(edevs, launchOptions(lc))
}

// buildStatus fills what Status takes from the superblocks for an array
// without them: md's own numbers (GET_ARRAY_INFO of a non-persistent
// array), no superblock.
func buildStatus(st *Status, a *engine.Array) {
	st.NotPersistent = true
	st.Layout = a.BuiltLayout()
}
