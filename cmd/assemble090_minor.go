package cmd

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"mdtool/engine"
	"mdtool/internal/mdadm/member"
	"mdtool/superblock"
)

// superMinorFlag is mdadm.c's -m/--super-minor: a minor number, or "dev"
// for the minor of the md device given (/dev/mdN: N); -1 when not given.
func superMinorFlag(v string, args []string) (int, error) {
	switch {
	case v == "":
		return -1, nil
	case v == "dev":
		if len(args) == 0 {
			return -1, usagef("--super-minor=dev given, but no md device.")
		}
		return mdMinor(args[0]), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return -1, usagef("Bad super-minor number: %s.", v)
	}
	return n, nil
}

// preferredMinor is getinfo_super's md_minor: a 0.90 superblock's
// preferred minor, -1 for 1.x (which has none).
func preferredMinor(d *asmDev) int {
	if d.minor != engine.Minor090 {
		return -1
	}
	p, err := probeDevice(d.path)
	if err != nil || p.v0 == nil || p.v0.sb == nil {
		return -1
	}
	defer p.close()
	return int(p.v0.sb.MDMinor)
}

// updateOne090 is update_super0 and store_super0 for the words that
// change a 0.90 superblock in place: "super-minor" (the md device's minor
// becomes the preferred minor), "resync" and "metadata" (to 1.0:
// assemble090_metadata.go). Any other word is not
// understood for 0.90 metadata (its 1.x rewrite must not land there).
func (as *assembler) updateOne090(m *member.Member, d *asmDev, u, mddev string) bool {
	if u == "byteorder" {
		return as.storeHostOrder090(m, d) // assemble_byteorder.go
	}
	p, err := probeDevice(d.path)
	if err != nil || p.v0 == nil || p.v0.sb == nil {
		as.errf("cannot re-read metadata from %s - aborting\n", d.path)
		return false
	}
	p.close()
	sb := p.v0.sb
	switch u {
	case "super-minor":
		sb.MDMinor = uint32(mdMinor(mddev))
		if as.verbose > 0 {
			as.errf("updating superblock of %s with minor number %d\n", d.path, sb.MDMinor)
		}
	case "resync":
		sb.State &^= superblock.SB090Clean
		sb.RecoveryCP = 0
	case "metadata":
		return as.updateMetadata090(m, d, sb)
	default:
		as.errf("--update=%s not understood for 0.90 metadata\n", u)
		return false
	}
	if err := m.WriteAll([]member.Write{{Offset: d.sbOff, Data: sb.MarshalWithChecksum()}}); err != nil {
		as.errf("Could not re-write superblock on %s.\n", d.path)
	}
	return true
}

// missing090 is what load_super0 says about a device without a 0.90
// superblock once select_devices loads every device as 0.90 (after a
// 0.90 member was accepted): ok is false when it can say nothing.
func missing090(dev string) (msg string, ok bool) {
	m, err := member.Open(dev, member.ReadOnly)
	if err != nil {
		return "", false
	}
	defer m.Close()
	size := m.Sectors() * 512
	if size < 128*512 { // MD_RESERVED_SECTORS
		return fmt.Sprintf("%s is too small for md: size is %d sectors.", dev, size), true
	}
	var b [8]byte
	if _, err := m.ReadAt(b[:], int64(superblock.Offset090(size))); err != nil {
		return fmt.Sprintf("Cannot read superblock on %s", dev), true
	}
	if magic := binary.LittleEndian.Uint32(b[:]); magic != superblock.Magic {
		return fmt.Sprintf("No super block found on %s (Expected magic %08x, got %08x)", dev, superblock.Magic, magic), true
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != 0 {
		return fmt.Sprintf("Cannot interpret superblock on %s - version is %d", dev, v), true
	}
	return "", false
}
