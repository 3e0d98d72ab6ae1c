package cmd

import (
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"

	"mdtool/bitmap"
	"mdtool/engine"
	"mdtool/internal/daemon"
	"mdtool/internal/mdadm/member"
	"mdtool/superblock"
)

// assemble --update=WORD: mdadm 4.2 rewrites the superblock of every member
// it chose (load_devices, update_super1, store_super1) before it starts
// the array. mdtool does the same for the words update_super1 handles for
// 1.x metadata; "summaries", "metadata" (0.90 to 1.0 only), "sparc2.2",
// "super-minor" and "bitmap" are not understood for 1.x metadata, as mdadm
// says.

// mdadmUpdates are the words mdadm 4.2's command line accepts for --update.
var mdadmUpdates = map[string]bool{
	"sparc2.2": true, "super-minor": true, "summaries": true, "resync": true, "uuid": true,
	"name": true, "homehost": true, "home-cluster": true, "nodes": true, "devicesize": true,
	"bitmap": true, "no-bitmap": true, "bbl": true, "no-bbl": true, "force-no-bbl": true,
	"ppl": true, "no-ppl": true, "metadata": true, "revert-reshape": true, "byteorder": true,
	"layout-original": true, "layout-alternate": true, "layout-unspecified": true,
}

// updatesNotDone are words mdadm accepts that mdtool does not do on
// assembly (clustered bitmaps, PPL, reshape).
var updatesNotDone = map[string]bool{
	"home-cluster": true, "nodes": true, "ppl": true, "revert-reshape": true,
}

const updateList = `Valid --update options are:
     'sparc2.2', 'super-minor', 'uuid', 'name', 'nodes', 'resync',
     'summaries', 'homehost', 'home-cluster', 'byteorder', 'devicesize',
     'bitmap', 'no-bitmap', 'metadata', 'revert-reshape'
     'bbl', 'no-bbl', 'force-no-bbl', 'ppl', 'no-ppl'
     'layout-original', 'layout-alternate', 'layout-unspecified'
`

// checkUpdateWord is mdadm.c's check of --update's value: "?" and "help"
// print the list (exit 0), an unknown word the list on stderr (exit 2).
// done is true when the command ends here with err.
func checkUpdateWord(env *Env, u string) (done bool, err error) {
	switch {
	case u == "":
		return false, nil
	case u == "?" || u == "help":
		fmt.Fprint(env.Stdout, "mdtool: "+updateList)
		return true, &ExitError{Code: ExitOK}
	case !mdadmUpdates[u]:
		fmt.Fprintf(env.Stderr, "mdtool: '--update=%s' is invalid.  %s", u, updateList)
		return true, &ExitError{Code: ExitUsage}
	case updatesNotDone[u]:
		return true, usagef("--update=%s is not supported by mdtool", u)
	}
	return false, nil
}

// updateIdent is what the update words take from the command line: the
// new uuid (--uuid, or one random uuid for every member), the name
// (--name, or mdadm's md minor) and the homehost.
type updateIdent struct {
	uuid     [16]byte
	name     string
	homehost string
}

// updateSupers rewrites the superblocks of devs for --update as mdadm's
// load_devices does; false (after mdadm's message) when the word is not
// understood or a superblock cannot be written.
func (as *assembler) updateSupers(j assembleJob, mddev string, devs []*asmDev) bool {
	u := as.o.update
	id := updateIdent{uuid: j.ident.uuid, name: j.ident.name, homehost: as.homehost}
	if u == "uuid" && !j.ident.uuidSet {
		if _, err := rand.Read(id.uuid[:]); err != nil {
			as.errf("cannot make a uuid: %v\n", err)
			return false
		}
	}
	if id.name == "" {
		id.name = strconv.Itoa(mdMinor(mddev))
	}
	for _, d := range devs {
		m, err := member.Open(d.path, member.Exclusive)
		if err != nil {
			as.errf("cannot re-read metadata from %s - aborting\n", d.path)
			return false
		}
		var ok bool
		if d.minor == engine.Minor090 {
			ok = as.updateOne090(m, d, u, mddev)
		} else {
			ok = as.updateOne(m, d, u, id)
		}
		m.Close()
		if !ok {
			return false
		}
	}
	return true
}

// updateOne updates and stores one member's superblock (and the bitmap
// superblock, which store_super1 writes back with it).
func (as *assembler) updateOne(m *member.Member, d *asmDev, u string, id updateIdent) bool {
	sb := d.sb
	var bm *bitmap.Header
	bmOff := d.sbOff + int64(sb.BitmapOffset)*512
	if sb.FeatureMap&superblock.FeatureBitmapOffset != 0 {
		if h, _, _ := m.ReadBitmap(bmOff, bitmap.HeaderSize); h != nil && h.Magic == bitmap.Magic {
			bm = h
		}
	}
	rv := updateSuper1(sb, bm, u, id, m.Sectors(), func(msg string) { as.errf("%s\n", fmt.Sprintf(msg, d.path)) })
	if rv < 0 {
		as.errf("--update=%s not understood for 1.x metadata\n", u)
		return false
	}
	ws := []member.Write{{Offset: d.sbOff, Data: sb.MarshalWithChecksum()}}
	if bm != nil && sb.FeatureMap&superblock.FeatureBitmapOffset != 0 {
		ws = append(ws, member.Write{Offset: bmOff, Data: bm.Marshal()})
	}
	if err := m.WriteAll(ws); err != nil {
		as.errf("Could not re-write superblock on %s.\n", d.path)
	}
	d.events = sb.Events
	d.fillInfo()
	return true
}

// updateSuper1 is mdadm 4.2's update_super1 for the words assemble takes:
// it changes sb (and bm, the bitmap superblock, nil without one) and
// returns -1 for a word it does not understand. warn prints a message
// with %s for the device.
func updateSuper1(sb *superblock.Superblock, bm *bitmap.Header, u string, id updateIdent, devSectors uint64, warn func(string)) int {
	if u == "homehost" && id.homehost != "" {
		// A name update that keeps the name after "host:".
		u = "name"
		id.name = sb.Name()
		if _, rest, ok := strings.Cut(id.name, ":"); ok {
			id.name = rest
		}
	}
	switch u {
	case "resync":
		sb.ResyncOffset = 0
	case "uuid":
		sb.SetUUID = id.uuid
		if sb.FeatureMap&superblock.FeatureBitmapOffset != 0 && bm != nil {
			bm.UUID = sb.SetUUID
		}
	case "no-bitmap":
		sb.FeatureMap &^= superblock.FeatureBitmapOffset
	case "bbl":
		updateBBL(sb, bm)
	case "no-bbl":
		if sb.FeatureMap&superblock.FeatureBadBlocks != 0 {
			warn("Cannot remove active bbl from %s")
		} else {
			sb.BBLogSize, sb.BBLogShift, sb.BBLogOffset = 0, 0, 0
		}
	case "force-no-bbl":
		sb.FeatureMap &^= superblock.FeatureBadBlocks
		sb.BBLogSize, sb.BBLogShift, sb.BBLogOffset = 0, 0, 0
	case "no-ppl":
		sb.FeatureMap &^= superblock.FeaturePPL | superblock.FeatureMultiplePPLs
	case "name":
		updateName(sb, id)
	case "devicesize":
		if sb.SuperOffset < sb.DataOffset {
			sb.DataSize = devSectors - sb.DataOffset
		}
	case "layout-original", "layout-alternate", "layout-unspecified":
		if sb.Level != 0 {
			warn("%s: " + u + " only supported for RAID0")
			return -1
		}
		if u == "layout-unspecified" {
			sb.FeatureMap &^= superblock.FeatureRAID0Layout
			sb.Layout = 0
		} else {
			sb.FeatureMap |= superblock.FeatureRAID0Layout
			sb.Layout = 2
			if u == "layout-original" {
				sb.Layout = 1
			}
		}
	default:
		return -1
	}
	return 0
}

// updateName stores id.name as set_name, prefixed with "homehost:" when it
// has no ':' and the whole fits in 31 bytes.
func updateName(sb *superblock.Superblock, id updateIdent) {
	n := id.name
	if id.homehost != "" && !strings.Contains(n, ":") && len(id.homehost)+1+len(n) < 32 {
		n = id.homehost + ":" + n
	} else if len(n) > 31 {
		n = n[:31]
	}
	sb.SetNameString(n)
}

// updateBBL is update_super1's "bbl": a bad-block log of 8 sectors where
// there is room (after the bitmap, at least 32 KiB past the superblock,
// for 1.1/1.2; before the superblock for 1.0).
func updateBBL(sb *superblock.Superblock, bm *bitmap.Header) {
	sbOff, dataOff := int64(sb.SuperOffset), int64(sb.DataOffset)
	var bitmapOff, bmSectors int64
	if sb.FeatureMap&superblock.FeatureBitmapOffset != 0 && bm != nil {
		bitmapOff = int64(sb.BitmapOffset)
		bmSectors = int64((bm.Bytes()+4095)&^4095) >> 9
	} else if sb.FeatureMap&(superblock.FeaturePPL|superblock.FeatureMultiplePPLs) != 0 {
		bitmapOff = int64(sb.PPLOffset())
		bmSectors = int64(sb.PPLSize())
	}
	if sbOff < dataOff {
		bb := sbOff + 8
		if bmSectors != 0 && bitmapOff > 0 {
			bb = bitmapOff + bmSectors
		}
		for bb < sbOff+8+32*2 && bb+8+8 <= dataOff {
			bb += 8
		}
		if bb+8 <= dataOff {
			sb.BBLogSize = 8
			sb.BBLogOffset = int32(bb)
		}
		return
	}
	var space int64
	if bmSectors != 0 && bitmapOff < 0 {
		space = -bitmapOff - bmSectors
	} else {
		space = sbOff - dataOff - int64(sb.DataSize)
	}
	if space >= 8 {
		sb.BBLogSize = 8
		sb.BBLogOffset = -8
	}
}

// mdMinor is the minor number mdadm's --update=name falls back to when no
// --name is given: N for /dev/mdN, /dev/md/N, mdN; 127 otherwise (the
// first minor mdadm gives a named array).
func mdMinor(mddev string) int {
	name, err := daemon.ArrayName(mddev)
	if err == nil && strings.HasPrefix(name, "md") {
		if n, err := strconv.Atoi(name[2:]); err == nil {
			return n
		}
	}
	return 127
}
