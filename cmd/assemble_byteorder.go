package cmd

import (
	"mdtool/engine"
	"mdtool/internal/mdadm/member"
	"mdtool/superblock"
)

// assemble --update=byteorder (mdadm 4.2): mdadm.c makes the metadata type
// "0.swap", so select_devices loads every device's 0.90 superblock turned
// over (examine_swap.go), and load_devices writes each chosen member's
// superblock back as it now is in memory: in this host's byte order. The
// assembly then goes on as for any 0.90 array.

// probeCandidateFor is probeCandidate, or its byte-swapped form for
// --update=byteorder.
func (as *assembler) probeCandidateFor(path string) (*asmDev, string) {
	if as.o.update != "byteorder" {
		return probeCandidate(path)
	}
	p, err := probeDeviceSwapped(path)
	if err != nil || p.m == nil || p.kind != kindV090 {
		if p != nil {
			p.close()
		}
		if err != nil {
			return probeCandidate(path) // its words for a device that cannot be opened
		}
		// load_super0's own word, then select_devices'
		why := "no RAID superblock on " + path
		if msg, ok := missing090Swapped(path); ok {
			why = msg + "\nmdtool: " + why
		}
		return nil, why
	}
	defer p.close()
	return probeCandidate090(p), ""
}

// storeHostOrder090 is load_devices for --update=byteorder on one member:
// its superblock, read turned over, is stored in this host's order
// (update_super0 changes nothing for the word; store_super0 writes it).
func (as *assembler) storeHostOrder090(m *member.Member, d *asmDev) bool {
	v := loadV090Swapped(m)
	if v == nil || d.minor != engine.Minor090 {
		as.errf("cannot re-read metadata from %s - aborting\n", d.path)
		return false
	}
	if err := m.WriteAll([]member.Write{{Offset: d.sbOff, Data: v.mem[:superblock.Size090]}}); err != nil {
		as.errf("Could not re-write superblock on %s.\n", d.path)
	}
	return true
}
