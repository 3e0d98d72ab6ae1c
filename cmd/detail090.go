package cmd

import (
	"crypto/sha1"
	"fmt"
	"io"

	"mdtool/superblock"
)

// sb090 is the 0.90 superblock of the member detail reads, or nil.
func (d *detailView) sb090() *superblock.SuperblockV090 {
	if d.st.Superblock090 == nil {
		return nil
	}
	sb, err := superblock.Parse090(d.st.Superblock090)
	if err != nil {
		return nil
	}
	return sb
}

// writeIdentity090 is mdadm's detail_super0: the UUID (with "local to
// host" when set_uuid2/3 hold the homehost's SHA-1) and the events as
// hi.lo; 0.90 has no name.
func (d *detailView) writeIdentity090(w io.Writer, sb *superblock.SuperblockV090) {
	fmt.Fprintf(w, "              UUID : %08x:%08x:%08x:%08x", sb.SetUUID0, sb.SetUUID1, sb.SetUUID2, sb.SetUUID3)
	if d.homehost != "" {
		h := sha1.Sum([]byte(d.homehost))
		if w2, w3 := superblock.HomehostWords090(h[:]); w2 == sb.SetUUID2 && w3 == sb.SetUUID3 {
			fmt.Fprintf(w, " (local to host %s)", escName(d.homehost))
		}
	}
	fmt.Fprintf(w, "\n            Events : %d.%d\n\n", sb.EventsHi, sb.EventsLo)
}
