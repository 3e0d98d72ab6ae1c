package cmd

import (
	"mdtool/internal/daemon"
	"mdtool/superblock"
)

// detailSuper is the superblock detail prints from: the daemon's copy of
// a member's, or, for an array without superblocks (build), an empty one
// with md's creation time of the array (set_array_info).
func detailSuper(st *daemon.Status) (*superblock.Superblock, error) {
	if st.NotPersistent {
		sb := &superblock.Superblock{}
		sb.CTime = superblock.MakeTime(st.Started.Unix(), 0)
		return sb, nil
	}
	return superblock.Parse(padSuper(st.Superblock))
}
