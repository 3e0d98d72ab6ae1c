package cmd

// examine (mdadm --examine, -E): print the md superblock of member
// devices, exactly as mdadm 4.2 prints it, or as JSON.

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"mdtool/bitmap"
	"mdtool/internal/mdadm/member"
	"mdtool/internal/nbdclient"
	"mdtool/ioctl"
	"mdtool/superblock"
)

const examineLong = `Print the md superblock of each DEVICE, as "mdadm --examine" (-E) does.

DEVICE may be a block device or a plain image file. The text is identical
to mdadm 4.2's: v1.0/1.1/1.2 superblocks (every optional line: internal
bitmap, PPL, reshape, flags, recovery offset, unused space, bad-block log,
checksum, layout, chunk, device role, array state), 0.90 superblocks, and an
MBR partition table when the device holds nothing else. The array name is
followed by "(local to host H)" when its host part is the homehost
(--homehost, else HOMEHOST in mdadm.conf, else the system host name).
Unlike mdadm, names are shown escaped in every output ("\n", "\t", "\xNN",
"\\" for control characters, unprintable bytes and the backslash): a name is
never a second line. In ARRAY lines the device maps those bytes and quotes
to "_"; --export values are single-quoted when a shell would read them.

A device without an md superblock gives "No md superblock detected on DEV."
and exit status 1; the other devices are still examined.

  --brief, -b     one ARRAY line per array, as for mdadm.conf (devices of the
                  same array are grouped; "spares=N" on a second line when
                  some members are spares). mdadm 4.2 ends the line with
                  name=HOST:NAME; mdadm 4.3 and later no longer print name=.
  --scan, -s      like --brief; without DEVICE arguments, examine the devices
                  named by the DEVICE lines of mdadm.conf (default "DEVICE
                  partitions": every device in /proc/partitions). Devices
                  that cannot be opened or hold no superblock are skipped
                  silently. With --verbose the ARRAY line carries level= and
                  num-devices=, and a second line lists devices=.
  --export, -Y    KEY=VALUE lines for udev (MD_LEVEL, MD_DEVICES, MD_NAME,
                  MD_ARRAY_SIZE, MD_UUID, MD_UPDATE_TIME, MD_DEV_UUID,
                  MD_EVENTS), as mdadm --examine --export.
  --config, -c    mdadm.conf to read (default /etc/mdadm/mdadm.conf, else
                  /etc/mdadm.conf; "partitions" and "none" as for mdadm).
  --json          one JSON document (see below); mdadm has no such option.

JSON output (--json) is an array with one object per device, in argument
order. Sizes are given in sectors (512 bytes) and in bytes, under names
that say so; times as RFC 3339 (UTC) and Unix seconds; UUIDs as mdadm
prints them. Optional members are left out when mdadm would print no line
for them. Common members:

  device                 the path examined
  metadata               "1.0", "1.1", "1.2", "0.90", "mbr", or "" (nothing)
  error                  why the device could not be examined (then nothing else)
  device_size_bytes, device_size_sectors
  problems               list of {area, offset, field, message}: what the
                         kernel or mdadm would object to (bad checksum,
                         non-zero padding, ignored bitmap, ...); area is
                         "superblock", "bitmap" or "bad_block_log", offset
                         is the byte offset inside that area

v1.x superblocks:

  magic, feature_map (numbers), features (list of names: bitmap,
  recovery_offset, reshape_active, bad_blocks, replacement,
  reshape_backwards, new_offset, recovery_bitmap, clustered, journal, ppl,
  multiple_ppls, raid0_layout, bitN for unknown bits)
  array_uuid, device_uuid, name, name_host, name_local (bool), cluster_name
  creation_time, creation_time_unix, update_time, update_time_unix
  level (number), level_name, layout (number), layout_name,
  chunk_sectors, chunk_bytes, raid_devices
  avail_dev_size_sectors/_bytes (data_size), used_dev_size_sectors/_bytes
  (size), array_size_kib/_bytes (levels above 0)
  data_offset_sectors/_bytes, super_offset_sectors/_bytes,
  new_offset_sectors, recovery_offset_sectors,
  unused_space: {before_sectors, after_sectors}
  state ("clean" or "active"), resync_offset_sectors (absent when clean)
  bitmap_offset_sectors (signed, from the superblock)
  ppl: {offset_sectors, size_sectors}
  reshape: {position_sectors, position_bytes, delta_disks, new_level,
  new_level_name, new_layout, new_layout_name, new_chunk_sectors,
  new_chunk_bytes, backwards}
  flags (list: write-mostly, failfast)
  bad_block_log: {entries, offset_sectors, size_sectors, shift,
  bad_blocks_present, bad_blocks: [{start_sector, sectors}]}
  checksum: {stored, computed, correct}
  events, dev_number, max_dev, cnt_corrected_read
  device_role: {kind: active|spare|faulty|journal|replacement, slot}
  array_state ("AA."), array_state_consistent (bool)
  roles: [{dev_number, role: active|spare|faulty|journal|reserved, slot}]
         (dev_roles up to the last entry that is not an unused spare)
  bitmap: {offset_sectors, magic, version, uuid, events, events_cleared,
  state, stale, chunk_bytes, daemon_sleep_seconds, write_behind,
  sync_size_sectors, sync_size_bytes, bits, dirty, nodes, cluster_name}

0.90 superblocks:

  magic, version ("0.90.0"), uuid, name_local, creation_time(_unix),
  update_time(_unix), level, level_name, layout, layout_name, chunk_bytes,
  used_dev_size_kib/_bytes, array_size_kib/_bytes, raid_devices,
  total_devices, preferred_minor, not_persistent, state, bitmap_present,
  active_devices, working_devices, failed_devices, spare_devices, checksum,
  events, reshape, this_disk and disks: [{slot, number, major, minor,
  raid_disk, state: [faulty, active, sync, removed, write-mostly,
  failfast, ...]}]

MBR: mbr_magic, partitions: [{index, type, start_sector, sectors}].`

// examineOptions are the examine flags.
type examineOptions struct {
	brief, scan, export, json, verbose bool
	config                             string
	metadata                           string // -e: examine only that superblock type's location (examine_metadata.go)
	homehost                           string
	homehostGiven                      bool
}

func newExamineCmd(env *Env) *cobra.Command {
	o := &examineOptions{}
	c := &cobra.Command{
		Use:   "examine [flags] DEVICE...",
		Short: "Print the md superblock of member devices (mdadm --examine)",
		Long:  examineLong,
		RunE: func(c *cobra.Command, args []string) error {
			o.verbose, _ = c.Flags().GetBool("verbose")
			o.homehost, _ = c.Flags().GetString("homehost")
			// Given on the command line, or set from MDTOOL_HOMEHOST or the
			// configuration file (which do not mark the flag changed).
			o.homehostGiven = flagChanged(c.Flags(), "homehost") || o.homehost != ""
			return runExamine(env, o, args)
		},
	}
	fs := c.Flags()
	fs.BoolVarP(&o.brief, "brief", "b", false, "print ARRAY lines for mdadm.conf")
	fs.BoolVarP(&o.scan, "scan", "s", false, "like --brief; without devices, examine those of mdadm.conf's DEVICE lines")
	fs.BoolVarP(&o.export, "export", "Y", false, "print KEY=VALUE lines (for udev)")
	fs.BoolVar(&o.json, "json", false, "print one JSON document")
	fs.StringVarP(&o.config, "config", "c", "", "mdadm.conf to read (default /etc/mdadm/mdadm.conf, then /etc/mdadm.conf)")
	fs.StringVarP(&o.metadata, "metadata", "e", "", "superblock version to look for (1.0, 1.1, 1.2)")
	return c
}

// examineSetup loads mdadm.conf when mdadm would (for the homehost, or
// for --scan without devices), prints its complaints and resolves the
// homehost.
func examineSetup(env *Env, config, homehost string, homehostGiven, needDevices bool) (*MdadmConf, string, error) {
	var conf *MdadmConf
	if !homehostGiven || needDevices {
		var err error
		conf, err = LoadMdadmConf(config)
		if err != nil {
			return nil, "", exitf(ExitFailure, "%v", err)
		}
		for _, w := range conf.Warnings {
			fmt.Fprintf(env.Stderr, "mdtool: %s\n", confWarningText(w))
		}
	}
	return conf, ResolveHomeHost(homehost, homehostGiven, conf, env.Hostname), nil
}

// runExamine is mdadm's Examine() with mdadm.c's preparation.
func runExamine(env *Env, o *examineOptions, devs []string) error {
	devs, homehost, err := examineTargets(env, o, devs)
	if err != nil {
		return err
	}
	out := &bytes.Buffer{}
	var rv ExitCode
	if o.json {
		rv = examineJSONAll(env, out, devs, o.scan, homehost)
	} else {
		rv = examineTextAll(env, out, o, devs, homehost)
	}
	if _, err := env.Stdout.Write(out.Bytes()); err != nil {
		return exitf(ExitFailure, "write: %v", err)
	}
	if rv != ExitOK {
		return &ExitError{Code: rv}
	}
	return nil
}

// examineTargets reads the configuration and returns the devices to
// examine (those of its DEVICE lines when none are given) and the
// homehost.
func examineTargets(env *Env, o *examineOptions, devs []string) ([]string, string, error) {
	if len(devs) == 0 && !o.scan {
		return nil, "", exitf(ExitUsage, "No devices to examine")
	}
	conf, homehost, err := examineSetup(env, o.config, o.homehost, o.homehostGiven, len(devs) == 0)
	if err != nil {
		return nil, "", err
	}
	if len(devs) == 0 {
		devs = conf.DeviceList()
		if len(devs) == 0 {
			name := o.config
			if name == "" {
				name = DefaultMdadmConf
			}
			return nil, "", exitf(ExitFailure, "No devices listed in %s", name)
		}
	}
	return devs, homehost, nil
}

// briefArray is one ARRAY line of examine --brief: the first device seen
// of an array, and all of its devices.
type briefArray struct {
	first  *mdProbe
	devs   []string
	spares int
}

// examineTextAll examines every device in text (full, --brief or
// --export) into out; it returns mdadm's exit status.
func examineTextAll(env *Env, out *bytes.Buffer, o *examineOptions, devs []string, homehost string) ExitCode {
	// "--scan implies --brief unless -vv" (mdadm.c); mdtool's --verbose
	// is a single level.
	brief := o.brief || o.scan
	rv := ExitOK
	var arrays []*briefArray
	for _, dev := range devs {
		if msg, ok := forcedV1Missing(dev, o.metadata); ok {
			if !brief {
				fmt.Fprintf(env.Stderr, "mdtool: %s\n", msg)
			}
			continue
		}
		probe := probeDevice
		if swap090Metadata(o.metadata) {
			probe = probeDeviceSwapped // examine_swap.go
		}
		p, err := probe(dev)
		if err != nil {
			if !o.scan {
				fmt.Fprintf(env.Stderr, "mdtool: %s\n", err)
				rv = ExitFailure
			}
			continue
		}
		if p.kind == kindNone {
			p.close()
			if !brief {
				fmt.Fprintf(env.Stderr, "mdtool: No md superblock detected on %s.\n", dev)
				rv = ExitFailure
			}
			continue
		}
		switch {
		case brief && p.kind == kindMBR:
			if !o.scan {
				fmt.Fprintf(env.Stderr, "mdtool: No brief listing for mbr on %s\n", dev)
			}
		case brief:
			arrays = addBriefDevice(arrays, p, dev)
		case o.export:
			switch p.kind {
			case kindV1:
				writeExportV1(out, p.v1)
			case kindV090:
				writeExportV090(out, p.v0)
			}
		default:
			fmt.Fprintf(out, "%s:\n", dev)
			switch p.kind {
			case kindV1:
				writeExamineV1(out, p.v1, homehost)
			case kindV090:
				writeExamineV090(out, p.v0, homehost)
			case kindMBR:
				writeExamineMBR(out, p.mbr)
			}
		}
		p.close()
	}
	writeBriefArrays(out, arrays, o.verbose)
	return rv
}

// addBriefDevice counts device dev (probed as p) in the ARRAY line of its
// array, adding one for an array not seen yet.
func addBriefDevice(arrays []*briefArray, p *mdProbe, dev string) []*briefArray {
	var ap *briefArray
	for _, a := range arrays {
		if a.first.kind == p.kind && exSameArray(a.first, p) {
			ap = a
			break
		}
	}
	if ap == nil {
		ap = &briefArray{first: p}
		arrays = append(arrays, ap)
	}
	if !exDiskSync(p) {
		ap.spares++
	}
	ap.devs = append(ap.devs, dev)
	return arrays
}

// writeBriefArrays prints the ARRAY lines of examine --brief.
func writeBriefArrays(out *bytes.Buffer, arrays []*briefArray, verbose bool) {
	// mdadm keeps its arrays in a list it prepends to: the array seen
	// last is printed first.
	for i := len(arrays) - 1; i >= 0; i-- {
		ap := arrays[i]
		switch ap.first.kind {
		case kindV1:
			writeBriefV1(out, ap.first.v1, verbose)
		case kindV090:
			writeBriefV090(out, ap.first.v0, verbose)
		}
		if ap.spares > 0 {
			fmt.Fprintf(out, "   spares=%d", ap.spares)
		}
		if verbose {
			out.WriteString("   devices")
			sep := byte('=')
			for _, d := range ap.devs {
				out.WriteByte(sep)
				out.WriteString(d)
				sep = ','
			}
		}
		if ap.spares > 0 || verbose {
			out.WriteByte('\n')
		}
	}
}

// exSameArray is compare_super == 0 for two probes of the same kind.
func exSameArray(a, b *mdProbe) bool {
	switch a.kind {
	case kindV1:
		return sameArrayV1(a.v1, b.v1)
	case kindV090:
		return sameArrayV090(a.v0, b.v0)
	}
	return false
}

// exDiskSync is getinfo_super's MD_DISK_SYNC bit for the device: a device
// without it counts as a spare on the ARRAY line.
func exDiskSync(p *mdProbe) bool {
	switch p.kind {
	case kindV1:
		return v1DiskSync(p.v1)
	case kindV090:
		return p.v0.sb.ThisDisk.State&(1<<2) != 0
	}
	return true
}

// writeJSON writes v as indented JSON followed by a newline.
func writeJSONDoc(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(jsonSafe(b), '\n')
	_, err = w.Write(b)
	return err
}

// Finding the metadata on a device the way mdadm 4.2's guess_super does,
// for examine and examine-bitmap.

// Metadata kinds a probe can find.
const (
	kindNone = ""
	kindV1   = "1.x"
	kindV090 = "0.90"
	kindMBR  = "mbr"
)

// mdadm's in-memory layout behind a v1 superblock (super1.c): the 4 KiB
// superblock, 512 bytes of bitmap superblock, then struct misc_dev_info
// (the device size in sectors).
const (
	v1SBSize   = 4096
	v1BMSize   = 512
	v1MemBytes = v1SBSize + v1BMSize + 8
)

// mdProbe is what guess_super found on one device.
type mdProbe struct {
	path   string
	m      *member.Member
	size   uint64 // bytes
	kind   string
	v1     *v1Probe
	v0     *v090Probe
	mbr    []byte // 512 bytes, kind == kindMBR
	closed bool
}

// v1Probe is a v1.x superblock as mdadm holds it after load_super1.
type v1Probe struct {
	loaded *member.V1
	minor  int
	// mem is the superblock, the bitmap superblock and the device size as
	// mdadm has them in memory. mdadm clears the bitmap feature bit in
	// memory when the bitmap superblock is unreadable or belongs to
	// another array; mem holds that changed feature_map.
	mem []byte
	// sb is decoded from mem; its dev_roles run on past the 4 KiB into
	// the bitmap superblock and the device size, as mdadm's loops read
	// them.
	sb *superblock.Superblock
	// bm is the bitmap superblock mdadm read (all zero when the device
	// has no valid bitmap).
	bm *bitmap.Header
	// bitmapDropped says why the bitmap feature bit was cleared ("" if
	// it was not).
	bitmapDropped string
	devSectors    uint64
}

// raw returns the 4 KiB superblock area as mdadm holds it.
func (v *v1Probe) raw() []byte { return v.mem[:v1SBSize] }

// v090Probe is a 0.90 superblock as mdadm holds it after load_super0.
type v090Probe struct {
	sb *superblock.SuperblockV090
	// mem is the superblock followed by the 4 KiB after it (the bitmap
	// superblock when present), as mdadm reads it; zero when not read.
	mem []byte
	err error // what Parse090 objected to
	// bitmapDropped is set when MD_SB_BITMAP_PRESENT was set but the bitmap
	// superblock is unreadable or foreign: mdadm clears the bit in memory.
	bitmapDropped bool
	offset        uint64 // byte offset of the superblock
}

// openError is a device that could not be opened at all (mdadm: "cannot
// open DEV: ERR").
type openError struct {
	path string
	err  error
}

func (e *openError) Error() string { return openFailure(e.path, e.err) }

// openFailure is the one line for a member that could not be opened:
// "DEV is not a block device or regular file." for a FIFO, a character
// device, a directory or a socket (the wording of mdadm's
// stat_is_blkdev), mdadm's "cannot open DEV: REASON" otherwise.
func openFailure(path string, err error) string {
	if errors.Is(err, ioctl.ErrNotMember) {
		return fmt.Sprintf("%s is not a block device or regular file.", path)
	}
	return fmt.Sprintf("cannot open %s: %s", path, strerror(err))
}

// probeDevice opens path and finds its metadata as guess_super does: a
// 0.90 superblock, a v1.x superblock (the 1.0/1.1/1.2 candidate with the
// latest ctime) and an MBR partition table are each tried; the one with
// the latest creation time wins, earlier ones winning ties (0.90 before
// 1.x before MBR, whose time is 0). mdadm also knows ddf and imsm
// containers; mdtool does not look for them. A GPT disk carries a
// protective MBR, which mdadm 4.2 always prefers, so GPT is not tried
// either.
//
// It returns an *openError when the device cannot be opened; a device
// whose size cannot be read, or that holds nothing, gives kind kindNone.
// The caller must close the probe.
func probeDevice(path string) (*mdProbe, error) {
	// ioctl.OpenMember: never blocks on a FIFO, refuses what is not a
	// block device or a regular file, takes no lock (a served member can
	// be examined).
	// A remote member (an NBD URI) has no such check; a server that
	// cannot be reached is a device that cannot be opened.
	if !nbdclient.IsURI(path) {
		f, err := ioctl.OpenMember(path, ioctl.OpenOptions{})
		if err != nil {
			return nil, &openError{path, err}
		}
		f.Close()
	}
	p := &mdProbe{path: path}
	m, err := member.Open(path, member.ReadOnly)
	if nbdclient.IsURI(path) && err != nil {
		return nil, &openError{path, err}
	}
	if err != nil {
		// Opened, but no size: mdadm's get_dev_size fails and every
		// metadata handler gives up.
		return p, nil
	}
	p.m = m
	p.size = m.Geom.Size

	type cand struct {
		kind  string
		ctime uint32
	}
	var cands []cand
	if v0 := probeV090(m); v0 != nil {
		p.v0 = v0
		cands = append(cands, cand{kindV090, v0.sb.CTime})
	}
	if v1 := probeV1(m); v1 != nil {
		p.v1 = v1
		cands = append(cands, cand{kindV1, uint32(uint64(v1.sb.CTime))})
	}
	if mbr := probeMBR(m); mbr != nil {
		p.mbr = mbr
		cands = append(cands, cand{kindMBR, 0})
	}
	var best *cand
	for i := range cands {
		if best == nil || best.ctime < cands[i].ctime {
			best = &cands[i]
		}
	}
	if best != nil {
		p.kind = best.kind
	}
	return p, nil
}

// close releases the device.
func (p *mdProbe) close() {
	if p.m != nil && !p.closed {
		p.m.Close()
		p.closed = true
	}
}

// probeV1 is load_super1 in guess mode, plus its bitmap check.
func probeV1(m *member.Member) *v1Probe {
	v, err := m.LoadV1(-1)
	if err != nil || v == nil || v.SB == nil {
		return nil
	}
	devSectors := m.Sectors()
	mem := make([]byte, v1MemBytes)
	copy(mem, v.Raw)
	binary.LittleEndian.PutUint64(mem[v1SBSize+v1BMSize:], devSectors)
	vp := &v1Probe{loaded: v, minor: v.Minor, mem: mem, devSectors: devSectors}
	sb, _ := superblock.Parse(mem[:v1SBSize])
	if sb == nil {
		return nil
	}
	if sb.FeatureMap&superblock.FeatureBitmapOffset != 0 {
		vp.bitmapDropped = loadBitmapV1(m, int64(v.Offset), sb, mem[v1SBSize:v1SBSize+v1BMSize])
		if vp.bitmapDropped != "" {
			superblock.ClearFeatures(mem, superblock.FeatureBitmapOffset)
		}
	}
	// Decoded again now that mem holds the bitmap superblock (or zeros)
	// and the changed feature_map.
	vp.sb, _ = superblock.Parse(mem)
	vp.bm, _ = bitmap.Decode(mem[v1SBSize : v1SBSize+v1BMSize])
	return vp
}

// loadBitmapV1 is locate_bitmap1 and the bitmap check of load_super1: it
// reads the bitmap superblock of the v1 superblock sb (found at sector
// sbSector) into bsb, and returns why mdadm ignores it ("" when it does
// not). bsb is cleared when the bitmap is ignored.
func loadBitmapV1(m *member.Member, sbSector int64, sb *superblock.Superblock, bsb []byte) string {
	// locate_bitmap1 seeks to super_offset + bitmap_offset; a negative
	// position makes lseek fail and the read happens where the superblock
	// read left the file (4 KiB after it).
	off := (sbSector + int64(sb.BitmapOffset)) * 512
	if off < 0 {
		off = sbSector*512 + v1SBSize
	}
	n, _ := m.ReadAt(bsb, off)
	var why string
	h, _ := bitmap.Decode(bsb)
	switch {
	case n != len(bsb):
		why = fmt.Sprintf("bitmap superblock at byte %d cannot be read", off)
	case h.Magic != bitmap.Magic:
		why = fmt.Sprintf("no bitmap magic at byte %d", off)
	case h.UUID != sb.SetUUID:
		why = fmt.Sprintf("the bitmap at byte %d belongs to another array (uuid %s)", off, uuidText(h.UUID, ':'))
	}
	if why != "" {
		clear(bsb)
	}
	return why
}

// probeV090 is load_super0: a 0.90 superblock in this host's (little)
// endianness with major_version 0. A byte-swapped superblock does not
// count, as for mdadm without "-e 0.swap".
func probeV090(m *member.Member) *v090Probe {
	sb, raw, err := m.LoadV090()
	return v090ProbeOf(m, sb, raw, err)
}

// v090ProbeOf is the rest of load_super0 once the superblock is read
// (raw, decoded as sb): its checks and its bitmap check.
func v090ProbeOf(m *member.Member, sb *superblock.SuperblockV090, raw []byte, err error) *v090Probe {
	if sb == nil || raw == nil || sb.BigEndian || sb.MajorVersion != 0 {
		return nil
	}
	off := superblock.Offset090(m.Geom.Size)
	v := &v090Probe{sb: sb, err: err, offset: off}
	v.mem = make([]byte, 2*superblock.Size090)
	copy(v.mem, raw)
	if sb.State&superblock.SB090BitmapPresent != 0 {
		bm := v.mem[superblock.Size090:]
		n, _ := m.ReadAt(bm, int64(off)+superblock.Size090)
		u := sb.UUID()
		// mdadm compares the bitmap uuid with the four set_uuid words
		// as they lie in memory (little-endian on x86).
		var mine [16]byte
		for i := 0; i < 4; i++ {
			binary.LittleEndian.PutUint32(mine[4*i:], binary.BigEndian.Uint32(u[4*i:]))
		}
		h, _ := bitmap.Decode(bm)
		if n != len(bm) || h.Magic != bitmap.Magic || h.UUID != mine {
			v.bitmapDropped = true
			sb.State &^= superblock.SB090BitmapPresent
			copy(v.mem, sb.Marshal())
		}
	}
	return v
}

// probeMBR is load_super_mbr: the first 512 bytes, if they end in 0xAA55.
func probeMBR(m *member.Member) []byte {
	b := make([]byte, 512)
	if n, _ := m.ReadAt(b, 0); n != 512 {
		return nil
	}
	if binary.LittleEndian.Uint16(b[510:]) != 0xAA55 {
		return nil
	}
	return b
}

// errNoSuperblock is examine's "No md superblock detected" condition.
var errNoSuperblock = errors.New("no md superblock detected")

// The text mdadm 4.2 prints for --examine, --examine --brief and
// --examine --export, reproduced field by field (super1.c examine_super1,
// brief_examine_super1, export_examine_super1, getinfo_super1; super0.c
// examine_super0, brief_examine_super0, export_examine_super0;
// super-mbr.c examine_mbr).

// setName32 is set_name as printf("%.32s") shows it.
func (v *v1Probe) setName32() []byte { return cString(v.sb.SetName[:]) }

// setNameC is set_name read as a C string: it runs on past the 32 bytes
// when they hold no NUL (into ctime), as strchr/printf in mdadm do.
func (v *v1Probe) setNameC() []byte { return superblock.NameCString(v.raw()) }

// roleFromSB is role_from_sb: dev_roles[dev_number], or spare. The
// decoded dev_roles are the max_dev entries mdadm's loops can visit, cut
// where the in-memory buffer ends.
func (v *v1Probe) roleFromSB() uint16 {
	if d := v.sb.DevNumber; uint64(d) < uint64(len(v.sb.DevRoles)) {
		return v.sb.DevRoles[d]
	}
	return superblock.RoleSpare
}

// checksum is calc_sb_1_csum on the in-memory superblock: 256+2*max_dev
// bytes (computed in C's int), the stored checksum taken as zero.
func (v *v1Probe) checksum() uint32 {
	size := int32(uint32(superblock.HeaderSize) + 2*v.sb.MaxDev)
	if size < 4 {
		return 0
	}
	return superblock.Checksum(v.mem)
}

// dataDisksFactor is the ddsks/ddsks_denom pair examine_super1 and
// export_examine_super1 use for "Array Size"; ok is false when mdadm
// prints no array size (level <= 0, or a level with no data disks).
// A zero denominator (raid10 layout with 0 copies) would make mdadm die
// of SIGFPE; mdtool reports no size instead.
func dataDisksFactor(level int32, raidDisks uint32, layout uint32) (ddsks int64, denom int64, ok bool) {
	denom = 1
	switch level {
	case 1:
		ddsks = 1
	case 4, 5:
		ddsks = int64(int32(raidDisks - 1))
	case 6:
		ddsks = int64(int32(raidDisks - 2))
	case 10:
		ddsks = int64(int32(raidDisks))
		denom = int64(layout&255) * int64((layout>>8)&255)
	}
	if ddsks == 0 || denom == 0 {
		return 0, 0, false
	}
	return ddsks, denom, true
}

// v1ArraySize is examine_super1's array size in bytes (signed, as mdadm
// computes it).
func v1ArraySize(f *v1Probe) (int64, bool) {
	if f.sb.Level <= 0 {
		return 0, false
	}
	dd, den, ok := dataDisksFactor(f.sb.Level, f.sb.RaidDisks, f.sb.Layout)
	if !ok {
		return 0, false
	}
	return int64(f.sb.Size<<9) * dd / den, true
}

// unusedSpace is getinfo_super1's space_before/space_after. show is false
// when mdadm prints no "Unused Space" line (space_after == 1, its marker
// for "no room", or a NEW_OFFSET reshape).
func unusedSpace(f *v1Probe) (before, after uint64, show bool) {
	fm := f.sb.FeatureMap
	superOff := f.sb.SuperOffset
	dataOff := f.sb.DataOffset
	var bitmapOff int64
	var pplOff, pplSize int64
	if fm&superblock.FeatureBitmapOffset != 0 {
		bitmapOff = int64(f.sb.BitmapOffset)
	} else if fm&(superblock.FeaturePPL|superblock.FeatureMultiplePPLs) != 0 {
		pplOff = int64(f.sb.PPLOffset())
		pplSize = int64(f.sb.PPLSize())
	}
	var dataSize uint64
	if f.sb.Level <= 0 {
		dataSize = f.sb.DataSize
	} else {
		dataSize = f.sb.Size
	}
	bbOff, bbSize := f.sb.BBLogOffset, f.sb.BBLogSize
	if dataOff < superOff {
		before = dataOff
		end := superOff
		if bbOff != 0 && bbSize != 0 {
			if bb := superOff + uint64(int64(bbOff)); bb < end {
				end = bb
			}
		}
		if x := superOff + uint64(bitmapOff) + uint64(pplOff); x < end {
			end = x
		}
		if dataOff+dataSize < end {
			after = end - dataSize - dataOff
		}
	} else {
		earliest := superOff + (32+4)*2
		if bitmapOff > 0 {
			// mdadm adds the bitmap size to bitmap_offset alone, not to
			// super_offset + bitmap_offset.
			bmend := uint64(bitmapOff) + uint64(calcBitmapSize(f.bm, 4096))/512
			if bmend > earliest {
				earliest = bmend
			}
		} else if pplOff > 0 {
			if e := uint64(pplOff + pplSize); e > earliest {
				earliest = e
			}
		}
		if bbOff != 0 && bbSize != 0 {
			if e := superOff + uint64(int64(bbOff)) + uint64(bbSize); e > earliest {
				earliest = e
			}
		}
		if earliest < dataOff {
			before = dataOff - earliest
		}
		after = f.devSectors - dataSize - dataOff
	}
	if before == 0 && after == 0 {
		after = 1
	}
	role := f.roleFromSBInfo()
	if role == superblock.RoleJournal {
		after = (f.devSectors - dataOff) % 8
	}
	return before, after, after != 1 && fm&superblock.FeatureNewOffset == 0
}

// roleFromSBInfo is the role getinfo_super1 uses: faulty when dev_number
// is beyond max_dev or MAX_DEVS.
func (v *v1Probe) roleFromSBInfo() uint16 {
	d := v.sb.DevNumber
	if d >= v.sb.MaxDev || d >= superblock.MaxDevs || uint64(d) >= uint64(len(v.sb.DevRoles)) {
		return superblock.RoleFaulty
	}
	return v.sb.DevRoles[d]
}

// calcBitmapSize is super1.c calc_bitmap_size: bytes of one node's bitmap
// (header and bits) rounded up to boundary, as a 32-bit unsigned value.
// A zero chunksize (on which mdadm divides by zero) counts as no bits.
func calcBitmapSize(h *bitmap.Header, boundary uint64) uint32 {
	syncSize := h.SyncSize
	chunk := uint64(h.ChunkSize)
	var bits uint64
	if chunk != 0 {
		bits = (syncSize*512 + chunk - 1) / chunk
	}
	bytes := (bits+7)>>3 + 256
	bytes = (bytes + boundary - 1) / boundary * boundary
	return uint32(bytes)
}

// v1DiskSync reports whether getinfo_super1 marks this device in sync
// (MD_DISK_SYNC): an active role and no replacement feature.
func v1DiskSync(f *v1Probe) bool {
	switch f.roleFromSBInfo() {
	case superblock.RoleSpare, superblock.RoleFaulty, superblock.RoleJournal:
		return false
	}
	return f.sb.FeatureMap&superblock.FeatureReplacement == 0
}

// writeExamineV1 prints examine_super1's text (without the "DEV:" line).
func writeExamineV1(w io.Writer, v *v1Probe, homehost string) {
	writeV1Identity(w, v, homehost)
	writeV1Space(w, v)
	deltaExtra := writeV1Reshape(w, v)
	writeV1Status(w, v)
	writeV1Geometry(w, v)
	writeV1Roles(w, v, deltaExtra)
}

// writeV1Identity prints the superblock, the array and its name.
func writeV1Identity(w io.Writer, v *v1Probe, homehost string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	fm := v.sb.FeatureMap
	level := v.sb.Level
	p("          Magic : %08x\n", v.sb.Magic)
	switch so := v.sb.SuperOffset; {
	case so <= 4:
		p("        Version : 1.1\n")
	case so <= 8:
		p("        Version : 1.2\n")
	default:
		p("        Version : 1.0\n")
	}
	p("    Feature Map : 0x%x\n", fm)
	p("     Array UUID : %s\n", uuidText(v.sb.SetUUID, ':'))
	p("           Name : %s", escName(string(v.setName32())))
	if nameIsLocal(v.sb.SetName[:], homehost) {
		p("  (local to host %s)", escName(homehost))
	}
	p("\n")
	if v.bm.Nodes > 0 && fm&superblock.FeatureBitmapOffset != 0 {
		p("   Cluster Name : %-64s\n", escName(string(v.bm.ClusterNameC())))
	}
	p("  Creation Time : %s\n", ctime24(int64(v.sb.CTime.Seconds())))
	p("     Raid Level : %s\n", levelName(int(level)))
	p("   Raid Devices : %d\n", int32(v.sb.RaidDisks))
	p("\n")
}

// writeV1Space prints the sizes, the offsets, the state and the device.
func writeV1Space(w io.Writer, v *v1Probe) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	fm := v.sb.FeatureMap
	level := v.sb.Level
	p(" Avail Dev Size : %d sectors%s\n", v.sb.DataSize, humanSize(int64(v.sb.DataSize<<9)))
	// mdadm compares the level as unsigned here: linear (-1), multipath
	// and faulty take this branch too (and print no array size).
	if uint32(level) > 0 {
		if asize, ok := v1ArraySize(v); ok {
			p("     Array Size : %d KiB%s\n", uint64(asize>>10), humanSize(asize))
		}
		if v.sb.Size != v.sb.DataSize {
			p("  Used Dev Size : %d sectors%s\n", v.sb.Size, humanSize(int64(v.sb.Size<<9)))
		}
	}
	if v.sb.DataOffset != 0 {
		p("    Data Offset : %d sectors\n", v.sb.DataOffset)
	}
	if v.sb.NewOffset != 0 && fm&superblock.FeatureNewOffset != 0 {
		p("     New Offset : %d sectors\n", v.sb.DataOffset+uint64(int64(v.sb.NewOffset)))
	}
	p("   Super Offset : %d sectors\n", v.sb.SuperOffset)
	if fm&superblock.FeatureRecoveryOffset != 0 {
		p("Recovery Offset : %d sectors\n", v.sb.RecoveryOffset)
	}
	if before, after, show := unusedSpace(v); show {
		p("   Unused Space : before=%d sectors, after=%d sectors\n", before, after)
	}
	state := "clean"
	if v.sb.ResyncOffset+1 != 0 {
		state = "active"
	}
	p("          State : %s\n", state)
	p("    Device UUID : %s\n", uuidText(v.sb.DeviceUUID, ':'))
	p("\n")
}

// writeV1Reshape prints the bitmap or PPL and the reshape; it returns
// the extra Array State slots of a shrinking reshape.
func writeV1Reshape(w io.Writer, v *v1Probe) (deltaExtra uint32) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	fm := v.sb.FeatureMap
	level := v.sb.Level
	if fm&superblock.FeatureBitmapOffset != 0 {
		p("Internal Bitmap : %d sectors from superblock\n", v.sb.BitmapOffset)
	} else if fm&(superblock.FeaturePPL|superblock.FeatureMultiplePPLs) != 0 {
		p("            PPL : %d sectors at offset %d sectors from superblock\n", v.sb.PPLSize(), v.sb.PPLOffset())
	}
	if fm&superblock.FeatureReshapeActive != 0 {
		rp := v.sb.ReshapePosition
		p("  Reshape pos'n : %d%s\n", rp/2, humanSize(int64(rp<<9)))
		if dd := v.sb.DeltaDisks; dd != 0 {
			p("  Delta Devices : %d", dd)
			p(" (%d->%d)\n", int32(v.sb.RaidDisks-uint32(dd)), int32(v.sb.RaidDisks))
			if dd < 0 {
				deltaExtra = uint32(-dd)
			}
		}
		if v.sb.NewLevel != level {
			p("      New Level : %s\n", levelName(int(v.sb.NewLevel)))
		}
		if v.sb.NewLayout != v.sb.Layout {
			switch level {
			case 5:
				p("     New Layout : %s\n", mapNumOr(r5LayoutTable, int(int32(v.sb.NewLayout))))
			case 6:
				p("     New Layout : %s\n", mapNumOr(r6LayoutTable, int(int32(v.sb.NewLayout))))
			case 10:
				p("     New Layout :%s\n", r10LayoutText(v.sb.NewLayout))
			}
		}
		if v.sb.NewChunk != v.sb.ChunkSize {
			p("  New Chunksize : %dK\n", int32(v.sb.NewChunk/2))
		}
		p("\n")
	}
	return deltaExtra
}

// writeV1Status prints the flags, the update time, the bad-block log,
// the checksum and the events.
func writeV1Status(w io.Writer, v *v1Probe) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	fm := v.sb.FeatureMap
	if fl := v.sb.DevFlags; fl != 0 {
		p("          Flags :")
		if fl&superblock.DevFlagWriteMostly != 0 {
			p(" write-mostly")
		}
		if fl&superblock.DevFlagFailFast != 0 {
			p(" failfast")
		}
		p("\n")
	}
	p("    Update Time : %s\n", ctime24(int64(v.sb.UTime.Seconds())))
	if v.sb.BBLogSize != 0 && v.sb.BBLogOffset != 0 {
		p("  Bad Block Log : %d entries available at offset %d sectors", int(v.sb.BBLogSize)*512/8, v.sb.BBLogOffset)
		if fm&superblock.FeatureBadBlocks != 0 {
			p(" - bad blocks present.")
		}
		p("\n")
	}
	if sum := v.checksum(); sum == v.sb.Checksum {
		p("       Checksum : %x - correct\n", v.sb.Checksum)
	} else {
		p("       Checksum : %x - expected %x\n", v.sb.Checksum, sum)
	}
	p("         Events : %d\n", v.sb.Events)
	p("\n")
}

// writeV1Geometry prints the layout and the chunk size.
func writeV1Geometry(w io.Writer, v *v1Probe) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	fm := v.sb.FeatureMap
	level := v.sb.Level
	if name, ok := layoutName(int(level), v.sb.Layout, fm&superblock.FeatureRAID0Layout != 0); ok {
		if level == 10 {
			p("         Layout :%s\n", name)
		} else {
			p("         Layout : %s\n", name)
		}
	}
	switch level {
	case 0, 4, 5, 6, 10:
		p("     Chunk Size : %dK\n", int32(v.sb.ChunkSize/2))
	case -1:
		p("       Rounding : %dK\n", int32(v.sb.ChunkSize/2))
	}
	p("\n")
}

// writeV1Roles prints the device role and the Array State.
func writeV1Roles(w io.Writer, v *v1Probe, deltaExtra uint32) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	fm := v.sb.FeatureMap
	p("   Device Role : ")
	switch role := v.roleFromSB(); {
	case role >= superblock.RoleFaulty:
		p("spare\n")
	case role == superblock.RoleJournal:
		p("Journal\n")
	case fm&superblock.FeatureReplacement != 0:
		p("Replacement device %d\n", role)
	default:
		p("Active device %d\n", role)
	}
	state, inconsistent := arrayStateV1(v, deltaExtra)
	p("   Array State : %s ('A' == active, '.' == missing, 'R' == replacing)\n", state)
	if inconsistent {
		p("WARNING Array state is inconsistent - each number should appear only once\n")
		for d := 0; d < len(v.sb.DevRoles); d++ {
			if r := v.sb.DevRoles[d]; r >= superblock.RoleFaulty {
				p(" %d:-", d)
			} else {
				p(" %d:%d", d, r)
			}
		}
		p("\n")
	}
}

// maxStateSlots caps the Array State line for absurd raid_disks values
// (mdadm would print billions of '.').
const maxStateSlots = 1 << 20

// arrayStateV1 builds the Array State letters and says whether mdadm
// warns that the state is inconsistent.
func arrayStateV1(f *v1Probe, deltaExtra uint32) (string, bool) {
	n := uint64(f.sb.RaidDisks + deltaExtra)
	if n > maxStateSlots {
		n = maxStateSlots
	}
	counts := map[uint16]int{}
	for i := 0; i < len(f.sb.DevRoles); i++ {
		counts[f.sb.DevRoles[i]]++
	}
	inconsistent := false
	var b strings.Builder
	for d := uint64(0); d < n; d++ {
		cnt := 0
		if d <= 0xffff {
			cnt = counts[uint16(d)]
		}
		switch {
		case cnt == 2 && uint32(f.sb.Level) > 0: // unsigned in mdadm: not raid0
			b.WriteByte('R')
		case cnt == 1:
			b.WriteByte('A')
		case cnt == 0:
			b.WriteByte('.')
		default:
			b.WriteByte('?')
			inconsistent = true
		}
	}
	lim := uint64(f.sb.RaidDisks + deltaExtra)
	for i := 0; i < len(f.sb.DevRoles); i++ {
		if r := uint64(f.sb.DevRoles[i]); r <= superblock.RoleMax && r > lim {
			inconsistent = true
		}
	}
	return b.String(), inconsistent
}

// mapNumOr is map_num with mdadm's "-unknown-" fallback.
func mapNumOr(t []mapping, n int) string {
	if s, ok := mapNum(t, n); ok {
		return s
	}
	return unknownName
}

// nameIsLocal is mdadm's test for "(local to host H)" (and match_home1):
// the set_name starts with "H:", H being 1 to 31 characters.
func nameIsLocal(setName []byte, homehost string) bool {
	l := len(homehost)
	return l > 0 && l < 32 && setName[l] == ':' && string(setName[:l]) == homehost
}

// writeExportV1 prints export_examine_super1's key=value lines.
func writeExportV1(w io.Writer, v *v1Probe) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("MD_LEVEL=%s\n", levelNameOrNull(int(v.sb.Level)))
	p("MD_DEVICES=%d\n", int32(v.sb.RaidDisks))
	// mdadm cuts the name at a newline and prints the rest raw; mdtool
	// prints all of it, escaped and shell-safe (exportValue).
	if name := v.setName32(); len(name) > 0 {
		p("MD_NAME=%s\n", exportValue(string(name)))
	}
	if asize, ok := v1ArraySize(v); ok {
		p("MD_ARRAY_SIZE=%s\n", humanSizeBrief(asize, prefixJEDEC))
	}
	p("MD_UUID=%s\n", uuidText(v.sb.SetUUID, ':'))
	p("MD_UPDATE_TIME=%d\n", v.sb.UTime.Seconds())
	p("MD_DEV_UUID=%s\n", uuidText(v.sb.DeviceUUID, ':'))
	p("MD_EVENTS=%d\n", v.sb.Events)
}

// writeBriefV1 prints brief_examine_super1's ARRAY line. mdadm 4.2 ends it
// with name=...; mdadm 4.3 and later no longer print name= (commit
// dcc22ae7, "Don't print name= in brief"), mdtool follows 4.2.
func writeBriefV1(w io.Writer, v *v1Probe, verbose bool) {
	full := v.setNameC()
	var nm []byte
	if i := strings.IndexByte(string(full), ':'); i >= 0 {
		nm = full[i+1:]
	} else if len(full) > 0 {
		nm = full
	}
	var b strings.Builder
	b.WriteString("ARRAY ")
	if nm != nil {
		b.WriteString("/dev/md/")
		b.WriteString(printEscape(string(nm))) // no space, quote or control byte
		b.WriteByte(' ')
	}
	lname, known := mapNum(persTable, int(v.sb.Level))
	if verbose && known {
		fmt.Fprintf(&b, " level=%s", lname)
	}
	switch so := v.sb.SuperOffset; {
	case so <= 4:
		b.WriteString(" metadata=1.1 ")
	case so <= 8:
		b.WriteString(" metadata=1.2 ")
	default:
		b.WriteString(" metadata=1.0 ")
	}
	if verbose {
		fmt.Fprintf(&b, "num-devices=%d ", int32(v.sb.RaidDisks))
	}
	b.WriteString("UUID=")
	b.WriteString(uuidText(v.sb.SetUUID, ':'))
	if len(full) > 0 {
		b.WriteString(" name=")
		b.WriteString(confValue(string(full)))
	}
	b.WriteByte('\n')
	io.WriteString(w, b.String())
}

// sameArrayV1 is compare_super1 == 0 for two loaded superblocks: same
// set_uuid, ctime, level, layout, size, chunksize and raid_disks.
func sameArrayV1(a, b *v1Probe) bool {
	fa, fb := a, b
	return fa.sb.SetUUID == fb.sb.SetUUID && fa.sb.CTime == fb.sb.CTime &&
		fa.sb.Level == fb.sb.Level && fa.sb.Layout == fb.sb.Layout &&
		fa.sb.Size == fb.sb.Size && fa.sb.ChunkSize == fb.sb.ChunkSize &&
		fa.sb.RaidDisks == fb.sb.RaidDisks
}

// v0Local is match_home0: the first 8 bytes of SHA-1(homehost) equal
// set_uuid2 and set_uuid3 as stored.
func v0Local(v *v090Probe, homehost string) bool {
	if homehost == "" {
		return false
	}
	h := sha1.Sum([]byte(homehost))
	// set_uuid2 and set_uuid3 as stored (little-endian on this host).
	var stored [8]byte
	binary.LittleEndian.PutUint32(stored[0:], v.sb.SetUUID2)
	binary.LittleEndian.PutUint32(stored[4:], v.sb.SetUUID3)
	return string(h[:8]) == string(stored[:])
}

// mapDevFunc names a block device by its numbers for the 0.90 device
// table (mdadm's map_dev: the shortest /dev name, "" if none). Tests
// replace it.
var mapDevFunc = mapDevFromDev

// writeExamineV090 prints examine_super0's text (without the "DEV:" line).
func writeExamineV090(w io.Writer, v *v090Probe, homehost string) {
	writeV090Identity(w, v, homehost)
	deltaExtra := writeV090Reshape(w, v)
	writeV090Status(w, v)
	writeV090Disks(w, v, deltaExtra)
}

// writeV090Identity prints the superblock, the array and its sizes.
func writeV090Identity(w io.Writer, v *v090Probe, homehost string) {
	sb := v.sb
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("          Magic : %08x\n", sb.Magic)
	p("        Version : %d.%02d.%02d\n", int32(sb.MajorVersion), int32(sb.MinorVersion), int32(sb.PatchVersion))
	if sb.MinorVersion >= 90 {
		p("           UUID : %08x:%08x:%08x:%08x", sb.SetUUID0, sb.SetUUID1, sb.SetUUID2, sb.SetUUID3)
		if homehost != "" && v0Local(v, homehost) {
			p(" (local to host %s)", escName(homehost))
		}
		p("\n")
	} else {
		p("           UUID : %08x\n", sb.SetUUID0)
	}
	if sb.NotPersistent != 0 {
		p("           Eedk : not persistent\n")
	}
	p("  Creation Time : %s\n", ctime24(int64(sb.CTime)))
	p("     Raid Level : %s\n", levelName(int(sb.Level)))
	if sb.Level > 0 {
		p("  Used Dev Size : %d%s\n", int32(sb.Size), humanSize(int64(sb.Size)<<10))
		if dd, den, ok := dataDisksFactor(sb.Level, sb.RaidDisks, sb.Layout); ok {
			asize := (int64(sb.Size) << 10) * dd / den
			p("     Array Size : %d%s\n", uint64(asize>>10), humanSize(asize))
		}
	}
	p("   Raid Devices : %d\n", int32(sb.RaidDisks))
	p("  Total Devices : %d\n", int32(sb.NrDisks))
	p("Preferred Minor : %d\n", int32(sb.MDMinor))
	p("\n")
}

// writeV090Reshape prints the reshape of a 0.91 superblock; it returns
// the extra device slots of a shrinking reshape.
func writeV090Reshape(w io.Writer, v *v090Probe) (deltaExtra int32) {
	sb := v.sb
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	if sb.MinorVersion > 90 && sb.ReshapePosition+1 != 0 {
		p("  Reshape pos'n : %d%s\n", sb.ReshapePosition/2, humanSize(int64(sb.ReshapePosition<<9)))
		if sb.DeltaDisks != 0 {
			p("  Delta Devices : %d", sb.DeltaDisks)
			p(" (%d->%d)\n", int32(sb.RaidDisks)-sb.DeltaDisks, int32(sb.RaidDisks))
			if sb.DeltaDisks < 0 {
				deltaExtra = -sb.DeltaDisks
			}
		}
		if sb.NewLevel != sb.Level {
			p("      New Level : %s\n", levelName(int(sb.NewLevel)))
		}
		if sb.NewLayout != sb.Layout {
			switch sb.Level {
			case 5:
				p("     New Layout : %s\n", mapNumOr(r5LayoutTable, int(int32(sb.NewLayout))))
			case 6:
				p("     New Layout : %s\n", mapNumOr(r6LayoutTable, int(int32(sb.NewLayout))))
			case 10:
				kind := "far"
				if sb.NewLayout&0x10000 != 0 {
					kind = "offset"
				}
				p("     New Layout : near=%d, %s=%d\n", sb.NewLayout&255, kind, (sb.NewLayout>>8)&255)
			}
		}
		if sb.NewChunk != sb.ChunkSize {
			p("  New Chunksize : %d\n", int32(sb.NewChunk))
		}
		p("\n")
	}
	return deltaExtra
}

// writeV090Status prints the state, the device counts, the checksum,
// the events and the geometry.
func writeV090Status(w io.Writer, v *v090Probe) {
	sb := v.sb
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("    Update Time : %s\n", ctime24(int64(sb.UTime)))
	state := "active"
	if sb.State&superblock.SB090Clean != 0 {
		state = "clean"
	}
	p("          State : %s\n", state)
	if sb.State&superblock.SB090BitmapPresent != 0 {
		p("Internal Bitmap : present\n")
	}
	p(" Active Devices : %d\n", int32(sb.ActiveDisks))
	p("Working Devices : %d\n", int32(sb.WorkingDisks))
	p(" Failed Devices : %d\n", int32(sb.FailedDisks))
	p("  Spare Devices : %d\n", int32(sb.SpareDisks))
	if sum := superblock.Checksum090(v.mem[:superblock.Size090], false); sum == sb.Checksum {
		p("       Checksum : %x - correct\n", sb.Checksum)
	} else {
		p("       Checksum : %x - expected %x\n", sb.Checksum, sum)
	}
	p("         Events : %d\n", sb.Events())
	p("\n")
	switch sb.Level {
	case 5:
		p("         Layout : %s\n", mapNumOr(r5LayoutTable, int(int32(sb.Layout))))
	case 6:
		p("         Layout : %s\n", mapNumOr(r6LayoutTable, int(int32(sb.Layout))))
	case 10:
		p("         Layout :%s\n", r10LayoutText(sb.Layout))
	}
	switch sb.Level {
	case 0, 4, 5, 6, 10:
		p("     Chunk Size : %dK\n", int32(sb.ChunkSize/1024))
	case -1:
		p("       Rounding : %dK\n", int32(sb.ChunkSize/1024))
	}
	p("\n")
}

// writeV090Disks prints the device table: this_disk, then the
// descriptors of the active, spare (and, while shrinking, departing)
// devices.
func writeV090Disks(w io.Writer, v *v090Probe, deltaExtra int32) {
	sb := v.sb
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("      Number   Major   Minor   RaidDevice State\n")
	last := int64(int32(sb.RaidDisks + uint32(deltaExtra) + sb.SpareDisks))
	if last > 60 {
		last = 60 // beyond this mdadm reads past its 8 KiB buffer
	}
	for d := -1; int64(d) < last; d++ {
		dp := superblock.Disk090Words(v.mem, d)
		number, major, minor, raidDisk, st := dp[0], dp[1], dp[2], dp[3], dp[4]
		label := "this"
		if d >= 0 {
			label = fmt.Sprintf("%4d", d)
		}
		p("%4s %5d   %5d    %5d    %5d     ", label, int32(number), int32(major), int32(minor), int32(raidDisk))
		wonly := st & superblock.Disk090WriteMostly
		failfast := st & superblock.Disk090FailFast
		st &^= wonly | failfast
		if st&superblock.Disk090Faulty != 0 {
			p(" faulty")
		}
		if st&superblock.Disk090Active != 0 {
			p(" active")
		}
		if st&superblock.Disk090Sync != 0 {
			p(" sync")
		}
		if st&superblock.Disk090Removed != 0 {
			p(" removed")
		}
		if wonly != 0 {
			p(" write-mostly")
		}
		if failfast != 0 {
			p(" failfast")
		}
		if st == 0 {
			p(" spare")
		}
		if major != 0 || minor != 0 {
			if dv := mapDevFunc(major, minor); dv != "" {
				p("   %s", dv)
			}
		}
		p("\n")
		if d == -1 {
			p("\n")
		}
	}
}

// writeBriefV090 prints brief_examine_super0's ARRAY line.
func writeBriefV090(w io.Writer, v *v090Probe, verbose bool) {
	sb := v.sb
	dev := fmt.Sprintf("/dev/md%d", int32(sb.MDMinor))
	if verbose {
		fmt.Fprintf(w, "ARRAY %s level=%s num-devices=%d", dev, levelName(int(sb.Level)), int32(sb.RaidDisks))
	} else {
		fmt.Fprintf(w, "ARRAY %s", dev)
	}
	if sb.MinorVersion >= 90 {
		fmt.Fprintf(w, " UUID=%08x:%08x:%08x:%08x", sb.SetUUID0, sb.SetUUID1, sb.SetUUID2, sb.SetUUID3)
	} else {
		fmt.Fprintf(w, " UUID=%08x", sb.SetUUID0)
	}
	fmt.Fprintf(w, "\n")
}

// writeExportV090 prints export_examine_super0's lines. Its
// MD_UPDATE_TIME is the creation time: mdadm 4.2 prints ctime there.
func writeExportV090(w io.Writer, v *v090Probe) {
	sb := v.sb
	fmt.Fprintf(w, "MD_LEVEL=%s\n", levelNameOrNull(int(sb.Level)))
	fmt.Fprintf(w, "MD_DEVICES=%d\n", int32(sb.RaidDisks))
	if sb.MinorVersion >= 90 {
		fmt.Fprintf(w, "MD_UUID=%08x:%08x:%08x:%08x\n", sb.SetUUID0, sb.SetUUID1, sb.SetUUID2, sb.SetUUID3)
	} else {
		fmt.Fprintf(w, "MD_UUID=%08x\n", sb.SetUUID0)
	}
	fmt.Fprintf(w, "MD_UPDATE_TIME=%d\n", sb.CTime)
	fmt.Fprintf(w, "MD_EVENTS=%d\n", sb.Events())
}

// sameArrayV090 is compare_super0 == 0: same uuid, versions,
// gvalid_words, ctime, level, size and raid_disks.
func sameArrayV090(a, b *v090Probe) bool {
	x, y := a.sb, b.sb
	return x.UUID() == y.UUID() && x.MajorVersion == y.MajorVersion &&
		x.MinorVersion == y.MinorVersion && x.PatchVersion == y.PatchVersion &&
		x.GValidWords == y.GValidWords && x.CTime == y.CTime && x.Level == y.Level &&
		x.Size == y.Size && x.RaidDisks == y.RaidDisks
}

// writeExamineMBR prints examine_mbr's text.
func writeExamineMBR(w io.Writer, b []byte) {
	fmt.Fprintf(w, "   MBR Magic : %04x\n", binary.LittleEndian.Uint16(b[510:]))
	for i := 0; i < 4; i++ {
		e := b[446+16*i:]
		if n := binary.LittleEndian.Uint32(e[12:]); n != 0 {
			fmt.Fprintf(w, "Partition[%d] : %12d sectors at %12d (type %02x)\n",
				i, n, binary.LittleEndian.Uint32(e[8:]), e[4])
		}
	}
}

// examine --json: the schema is documented in examineLong.

// jsonProblem is one thing the kernel or mdadm would object to.
type jsonProblem struct {
	Area    string `json:"area"`
	Offset  int64  `json:"offset"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

type jsonChecksum struct {
	Stored   uint32 `json:"stored"`
	Computed uint32 `json:"computed"`
	Correct  bool   `json:"correct"`
}

type jsonUnused struct {
	BeforeSectors uint64 `json:"before_sectors"`
	AfterSectors  uint64 `json:"after_sectors"`
}

type jsonPPL struct {
	OffsetSectors int64  `json:"offset_sectors"`
	SizeSectors   uint64 `json:"size_sectors"`
}

type jsonReshape struct {
	PositionSectors uint64 `json:"position_sectors"`
	PositionBytes   uint64 `json:"position_bytes"`
	DeltaDisks      int32  `json:"delta_disks"`
	NewLevel        int32  `json:"new_level"`
	NewLevelName    string `json:"new_level_name"`
	NewLayout       uint32 `json:"new_layout"`
	NewLayoutName   string `json:"new_layout_name,omitempty"`
	NewChunkSectors uint64 `json:"new_chunk_sectors"`
	NewChunkBytes   uint64 `json:"new_chunk_bytes"`
	Backwards       bool   `json:"backwards"`
}

type jsonBadBlock struct {
	StartSector uint64 `json:"start_sector"`
	Sectors     uint64 `json:"sectors"`
}

type jsonBBLog struct {
	Entries          int            `json:"entries"`
	OffsetSectors    int32          `json:"offset_sectors"`
	SizeSectors      uint16         `json:"size_sectors"`
	Shift            uint8          `json:"shift"`
	BadBlocksPresent bool           `json:"bad_blocks_present"`
	BadBlocks        []jsonBadBlock `json:"bad_blocks"`
}

type jsonRole struct {
	Kind string `json:"kind"`
	Slot *int   `json:"slot"`
}

type jsonRoleEntry struct {
	DevNumber int    `json:"dev_number"`
	Role      string `json:"role"`
	Slot      *int   `json:"slot"`
}

type jsonBitmapSummary struct {
	OffsetSectors      int32  `json:"offset_sectors"`
	Magic              uint32 `json:"magic"`
	Version            uint32 `json:"version"`
	UUID               string `json:"uuid"`
	Events             uint64 `json:"events"`
	EventsCleared      uint64 `json:"events_cleared"`
	State              uint32 `json:"state"`
	Stale              bool   `json:"stale"`
	ChunkBytes         uint32 `json:"chunk_bytes"`
	DaemonSleepSeconds uint32 `json:"daemon_sleep_seconds"`
	WriteBehind        uint32 `json:"write_behind"`
	SyncSizeSectors    uint64 `json:"sync_size_sectors"`
	SyncSizeBytes      uint64 `json:"sync_size_bytes"`
	Bits               uint64 `json:"bits"`
	Dirty              uint64 `json:"dirty"`
	Nodes              uint32 `json:"nodes"`
	ClusterName        string `json:"cluster_name,omitempty"`
}

// jsonExamine is one device of examine --json: the common members, then
// those of the metadata found (one of V1, V090, MBR), then problems.
//
// JSON schema of "mdtool examine --json" (also in the command's help):
//
//	[                                  one object per DEVICE, in order
//	  {
//	    "device": string,               path as given
//	    "metadata": string,             "1.0" "1.1" "1.2" "0.90" "mbr", "" when none
//	    "error": string,                only when the device could not be examined
//	    "device_size_bytes": int, "device_size_sectors": int,
//	    ... members of jsonV1, jsonV090 or jsonMBR (see their tags) ...
//	    "problems": [{"area": "superblock"|"bitmap"|"bad_block_log",
//	                  "offset": int (bytes into the area), "field": string,
//	                  "message": string}]      only when there are any
//	  }
//	]
//
// Conventions: sizes carry their unit in the name (_sectors = 512 bytes,
// _bytes, _kib); times are given twice, RFC 3339 in UTC ("creation_time")
// and Unix seconds ("creation_time_unix"); UUIDs are strings as mdadm
// prints them; members mdadm prints no line for are left out (or null
// for a role slot); lists are never null.
type jsonExamine struct {
	Device            string  `json:"device"`
	Metadata          string  `json:"metadata"`
	Error             string  `json:"error,omitempty"`
	DeviceSizeBytes   *uint64 `json:"device_size_bytes,omitempty"`
	DeviceSizeSectors *uint64 `json:"device_size_sectors,omitempty"`

	V1       *jsonV1       `json:"-"`
	V090     *jsonV090     `json:"-"`
	MBR      *jsonMBR      `json:"-"`
	Problems []jsonProblem `json:"-"`
}

// MarshalJSON writes one flat object: the common members, the members of
// the metadata kind, and "problems" when there are any.
func (d *jsonExamine) MarshalJSON() ([]byte, error) {
	type base jsonExamine
	parts := []any{(*base)(d)}
	switch {
	case d.V1 != nil:
		parts = append(parts, d.V1)
	case d.V090 != nil:
		parts = append(parts, d.V090)
	case d.MBR != nil:
		parts = append(parts, d.MBR)
	}
	if len(d.Problems) > 0 {
		parts = append(parts, struct {
			Problems []jsonProblem `json:"problems"`
		}{d.Problems})
	}
	return mergeJSONObjects(parts...)
}

// mergeJSONObjects marshals each value (each must give a JSON object) and
// joins their members into one object, in order.
func mergeJSONObjects(vs ...any) ([]byte, error) {
	out := []byte{'{'}
	for _, v := range vs {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
			return nil, fmt.Errorf("json: %T is not an object", v)
		}
		inner := b[1 : len(b)-1]
		if len(inner) == 0 {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, inner...)
	}
	return append(out, '}'), nil
}

type jsonV1 struct {
	Magic       uint32   `json:"magic"`
	FeatureMap  uint32   `json:"feature_map"`
	Features    []string `json:"features"`
	ArrayUUID   string   `json:"array_uuid"`
	DeviceUUID  string   `json:"device_uuid"`
	Name        string   `json:"name"`
	NameHost    string   `json:"name_host"`
	NameLocal   bool     `json:"name_local"`
	ClusterName string   `json:"cluster_name,omitempty"`

	CreationTime     string `json:"creation_time"`
	CreationTimeUnix int64  `json:"creation_time_unix"`
	UpdateTime       string `json:"update_time"`
	UpdateTimeUnix   int64  `json:"update_time_unix"`

	Level        int32  `json:"level"`
	LevelName    string `json:"level_name"`
	Layout       uint32 `json:"layout"`
	LayoutName   string `json:"layout_name,omitempty"`
	ChunkSectors uint64 `json:"chunk_sectors"`
	ChunkBytes   uint64 `json:"chunk_bytes"`
	RaidDevices  uint32 `json:"raid_devices"`

	AvailDevSizeSectors uint64  `json:"avail_dev_size_sectors"`
	AvailDevSizeBytes   uint64  `json:"avail_dev_size_bytes"`
	UsedDevSizeSectors  uint64  `json:"used_dev_size_sectors"`
	UsedDevSizeBytes    uint64  `json:"used_dev_size_bytes"`
	ArraySizeKiB        *uint64 `json:"array_size_kib,omitempty"`
	ArraySizeBytes      *uint64 `json:"array_size_bytes,omitempty"`

	DataOffsetSectors     uint64      `json:"data_offset_sectors"`
	DataOffsetBytes       uint64      `json:"data_offset_bytes"`
	SuperOffsetSectors    uint64      `json:"super_offset_sectors"`
	SuperOffsetBytes      uint64      `json:"super_offset_bytes"`
	NewOffsetSectors      *uint64     `json:"new_offset_sectors,omitempty"`
	RecoveryOffsetSectors *uint64     `json:"recovery_offset_sectors,omitempty"`
	UnusedSpace           *jsonUnused `json:"unused_space,omitempty"`

	State               string  `json:"state"`
	ResyncOffsetSectors *uint64 `json:"resync_offset_sectors,omitempty"`

	BitmapOffsetSectors *int32       `json:"bitmap_offset_sectors,omitempty"`
	PPL                 *jsonPPL     `json:"ppl,omitempty"`
	Reshape             *jsonReshape `json:"reshape,omitempty"`
	Flags               []string     `json:"flags"`
	BadBlockLog         *jsonBBLog   `json:"bad_block_log,omitempty"`
	Checksum            jsonChecksum `json:"checksum"`
	Events              uint64       `json:"events"`

	DevNumber        uint32 `json:"dev_number"`
	MaxDev           uint32 `json:"max_dev"`
	CntCorrectedRead uint32 `json:"cnt_corrected_read"`

	DeviceRole           jsonRole           `json:"device_role"`
	ArrayState           string             `json:"array_state"`
	ArrayStateConsistent bool               `json:"array_state_consistent"`
	Roles                []jsonRoleEntry    `json:"roles"`
	Bitmap               *jsonBitmapSummary `json:"bitmap,omitempty"`
}

type jsonDisk090 struct {
	Slot     int      `json:"slot"`
	Number   uint32   `json:"number"`
	Major    uint32   `json:"major"`
	Minor    uint32   `json:"minor"`
	RaidDisk uint32   `json:"raid_disk"`
	State    []string `json:"state"`
}

type jsonReshape090 struct {
	PositionSectors uint64 `json:"position_sectors"`
	DeltaDisks      int32  `json:"delta_disks"`
	NewLevel        int32  `json:"new_level"`
	NewLayout       uint32 `json:"new_layout"`
	NewChunkBytes   uint32 `json:"new_chunk_bytes"`
}

type jsonV090 struct {
	Magic            uint32          `json:"magic"`
	Version          string          `json:"version"`
	UUID             string          `json:"uuid"`
	NameLocal        bool            `json:"name_local"`
	CreationTime     string          `json:"creation_time"`
	CreationTimeUnix int64           `json:"creation_time_unix"`
	UpdateTime       string          `json:"update_time"`
	UpdateTimeUnix   int64           `json:"update_time_unix"`
	Level            int32           `json:"level"`
	LevelName        string          `json:"level_name"`
	Layout           uint32          `json:"layout"`
	LayoutName       string          `json:"layout_name,omitempty"`
	ChunkBytes       uint32          `json:"chunk_bytes"`
	UsedDevSizeKiB   uint32          `json:"used_dev_size_kib"`
	UsedDevSizeBytes uint64          `json:"used_dev_size_bytes"`
	ArraySizeKiB     *uint64         `json:"array_size_kib,omitempty"`
	ArraySizeBytes   *uint64         `json:"array_size_bytes,omitempty"`
	RaidDevices      uint32          `json:"raid_devices"`
	TotalDevices     uint32          `json:"total_devices"`
	PreferredMinor   uint32          `json:"preferred_minor"`
	NotPersistent    bool            `json:"not_persistent"`
	State090         string          `json:"state"`
	BitmapPresent    bool            `json:"bitmap_present"`
	ActiveDevices    uint32          `json:"active_devices"`
	WorkingDevices   uint32          `json:"working_devices"`
	FailedDevices    uint32          `json:"failed_devices"`
	SpareDevices     uint32          `json:"spare_devices"`
	Checksum090      jsonChecksum    `json:"checksum"`
	Events090        uint64          `json:"events"`
	Reshape090       *jsonReshape090 `json:"reshape,omitempty"`
	ThisDisk         jsonDisk090     `json:"this_disk"`
	Disks            []jsonDisk090   `json:"disks"`
}

type jsonPartition struct {
	Index       int    `json:"index"`
	Type        uint8  `json:"type"`
	StartSector uint32 `json:"start_sector"`
	Sectors     uint32 `json:"sectors"`
}

type jsonMBR struct {
	MBRMagic   uint16          `json:"mbr_magic"`
	Partitions []jsonPartition `json:"partitions"`
}

// v1FeatureNames lists the names of the feature bits.
var v1FeatureNames = []string{
	"bitmap", "recovery_offset", "reshape_active", "bad_blocks", "replacement",
	"reshape_backwards", "new_offset", "recovery_bitmap", "clustered", "journal",
	"ppl", "multiple_ppls", "raid0_layout",
}

func v1FeatureList(fm uint32) []string {
	out := []string{}
	for i := 0; i < 32; i++ {
		if fm&(1<<i) == 0 {
			continue
		}
		if i < len(v1FeatureNames) {
			out = append(out, v1FeatureNames[i])
		} else {
			out = append(out, fmt.Sprintf("bit%d", i))
		}
	}
	return out
}

// problemsOf flattens an error from the superblock or bitmap package
// into problems.
func formatProblems(area string, err error) []jsonProblem {
	if err == nil {
		return nil
	}
	var out []jsonProblem
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var sf *superblock.FormatError
		var bf *bitmap.FormatError
		switch {
		case errors.As(e, &sf):
			out = append(out, jsonProblem{area, sf.Offset, sf.Field, sf.Msg})
		case errors.As(e, &bf):
			out = append(out, jsonProblem{area, bf.Offset, bf.Field, bf.Msg})
		default:
			out = append(out, jsonProblem{area, 0, "", e.Error()})
		}
	}
	walk(err)
	return out
}

func exPtr[T any](v T) *T { return &v }

func exIntp(v int) *int { return &v }

// examineJSONAll examines every device into one JSON array; it returns
// the exit status mdadm's text mode would have.
func examineJSONAll(env *Env, w io.Writer, devs []string, scan bool, homehost string) ExitCode {
	rv := ExitOK
	docs := []*jsonExamine{}
	for _, dev := range devs {
		p, err := probeDevice(dev)
		if err != nil {
			if !scan {
				fmt.Fprintf(env.Stderr, "mdtool: %s\n", err)
				docs = append(docs, &jsonExamine{Device: dev, Error: err.Error()})
				rv = ExitFailure
			}
			continue
		}
		if p.kind == kindNone {
			p.close()
			if !scan {
				fmt.Fprintf(env.Stderr, "mdtool: No md superblock detected on %s.\n", dev)
				docs = append(docs, &jsonExamine{Device: dev, Error: errNoSuperblock.Error()})
				rv = ExitFailure
			}
			continue
		}
		docs = append(docs, examineJSON(p, homehost))
		p.close()
	}
	if err := writeJSONDoc(w, docs); err != nil {
		fmt.Fprintf(env.Stderr, "mdtool: %v\n", err)
		return ExitFailure
	}
	return rv
}

// examineJSON describes one probed device.
func examineJSON(p *mdProbe, homehost string) *jsonExamine {
	d := &jsonExamine{Device: p.path, DeviceSizeBytes: exPtr(p.size), DeviceSizeSectors: exPtr(p.size >> 9)}
	switch p.kind {
	case kindV1:
		d.Metadata = fmt.Sprintf("1.%d", p.v1.sb.Minor())
		d.V1, d.Problems = v1JSON(p, homehost)
	case kindV090:
		d.Metadata = "0.90"
		d.V090, d.Problems = v090JSON(p.v0, homehost)
	case kindMBR:
		d.Metadata = "mbr"
		m := &jsonMBR{MBRMagic: binary.LittleEndian.Uint16(p.mbr[510:]), Partitions: []jsonPartition{}}
		for i := 0; i < 4; i++ {
			e := p.mbr[446+16*i:]
			if n := binary.LittleEndian.Uint32(e[12:]); n != 0 {
				m.Partitions = append(m.Partitions, jsonPartition{i, e[4], binary.LittleEndian.Uint32(e[8:]), n})
			}
		}
		d.MBR = m
	}
	return d
}

func v1RoleName(r uint16) (string, *int) {
	switch {
	case r < superblock.RoleMax:
		return "active", exIntp(int(r))
	case r == superblock.RoleSpare:
		return "spare", nil
	case r == superblock.RoleFaulty:
		return "faulty", nil
	case r == superblock.RoleJournal:
		return "journal", nil
	}
	return "reserved", exIntp(int(r))
}

func v1JSON(p *mdProbe, homehost string) (*jsonV1, []jsonProblem) {
	v := p.v1
	// Every check the kernel applies before using the member,
	// including those that need the device size.
	_, perr := superblock.Validate(v.loaded.Raw, v.devSectors)
	problems := formatProblems("superblock", perr)
	if v.bitmapDropped != "" {
		problems = append(problems, jsonProblem{"superblock", 0x08, "feature_map",
			"internal bitmap ignored (mdadm clears the bitmap feature): " + v.bitmapDropped})
	}
	j := v1JSONBase(v, homehost)
	v1JSONOptional(j, v)
	var bbProblems, bmProblems []jsonProblem
	j.BadBlockLog, bbProblems = v1JSONBadBlocks(p)
	sum := v.checksum()
	j.Checksum = jsonChecksum{v.sb.Checksum, sum, sum == v.sb.Checksum}
	j.DeviceRole = v1JSONDeviceRole(v)
	v1JSONArrayState(j, v)
	j.Bitmap, bmProblems = v1JSONBitmap(p)
	problems = append(problems, bbProblems...)
	return j, append(problems, bmProblems...)
}

// v1JSONBase is the members every v1.x device has.
func v1JSONBase(v *v1Probe, homehost string) *jsonV1 {
	fm := v.sb.FeatureMap
	level := v.sb.Level
	name := string(v.setName32())
	host := ""
	if i := exIndexByte(name, ':'); i >= 0 {
		host = name[:i]
	}
	return &jsonV1{
		Magic:               v.sb.Magic,
		FeatureMap:          fm,
		Features:            v1FeatureList(fm),
		ArrayUUID:           uuidText(v.sb.SetUUID, ':'),
		DeviceUUID:          uuidText(v.sb.DeviceUUID, ':'),
		Name:                name,
		NameHost:            host,
		NameLocal:           nameIsLocal(v.sb.SetName[:], homehost),
		CreationTime:        timeRFC3339(int64(v.sb.CTime.Seconds())),
		CreationTimeUnix:    int64(v.sb.CTime.Seconds()),
		UpdateTime:          timeRFC3339(int64(v.sb.UTime.Seconds())),
		UpdateTimeUnix:      int64(v.sb.UTime.Seconds()),
		Level:               level,
		LevelName:           levelName(int(level)),
		Layout:              v.sb.Layout,
		ChunkSectors:        uint64(v.sb.ChunkSize),
		ChunkBytes:          uint64(v.sb.ChunkSize) * 512,
		RaidDevices:         v.sb.RaidDisks,
		AvailDevSizeSectors: v.sb.DataSize,
		AvailDevSizeBytes:   v.sb.DataSize * 512,
		UsedDevSizeSectors:  v.sb.Size,
		UsedDevSizeBytes:    v.sb.Size * 512,
		DataOffsetSectors:   v.sb.DataOffset,
		DataOffsetBytes:     v.sb.DataOffset * 512,
		SuperOffsetSectors:  v.sb.SuperOffset,
		SuperOffsetBytes:    v.sb.SuperOffset * 512,
		State:               "clean",
		Flags:               []string{},
		Events:              v.sb.Events,
		DevNumber:           v.sb.DevNumber,
		MaxDev:              v.sb.MaxDev,
		CntCorrectedRead:    v.sb.CntCorrectedRead,
		Roles:               []jsonRoleEntry{},
	}
}

// v1JSONOptional fills the members present only with some features,
// levels or states.
func v1JSONOptional(j *jsonV1, v *v1Probe) {
	fm := v.sb.FeatureMap
	level := v.sb.Level
	if n, ok := layoutName(int(level), v.sb.Layout, fm&superblock.FeatureRAID0Layout != 0); ok {
		if level == 10 {
			n = r10LayoutShort(v.sb.Layout)
		}
		j.LayoutName = n
	}
	if v.bm.Nodes > 0 && fm&superblock.FeatureBitmapOffset != 0 {
		j.ClusterName = string(cString(v.bm.ClusterName[:]))
	}
	if level > 0 {
		if asize, ok := v1ArraySize(v); ok {
			j.ArraySizeKiB = exPtr(uint64(asize >> 10))
			j.ArraySizeBytes = exPtr(uint64(asize))
		}
	}
	if fm&superblock.FeatureNewOffset != 0 {
		j.NewOffsetSectors = exPtr(v.sb.DataOffset + uint64(int64(v.sb.NewOffset)))
	}
	if fm&superblock.FeatureRecoveryOffset != 0 {
		j.RecoveryOffsetSectors = exPtr(v.sb.RecoveryOffset)
	}
	if before, after, show := unusedSpace(v); show {
		j.UnusedSpace = &jsonUnused{before, after}
	}
	if v.sb.ResyncOffset != superblock.MaxSector {
		j.State = "active"
		j.ResyncOffsetSectors = exPtr(v.sb.ResyncOffset)
	}
	if fm&superblock.FeatureBitmapOffset != 0 {
		j.BitmapOffsetSectors = exPtr(v.sb.BitmapOffset)
	} else if fm&(superblock.FeaturePPL|superblock.FeatureMultiplePPLs) != 0 {
		j.PPL = &jsonPPL{int64(v.sb.PPLOffset()), uint64(v.sb.PPLSize())}
	}
	if fm&superblock.FeatureReshapeActive != 0 {
		r := &jsonReshape{
			PositionSectors: v.sb.ReshapePosition,
			PositionBytes:   v.sb.ReshapePosition * 512,
			DeltaDisks:      v.sb.DeltaDisks,
			NewLevel:        v.sb.NewLevel,
			NewLevelName:    levelName(int(v.sb.NewLevel)),
			NewLayout:       v.sb.NewLayout,
			NewChunkSectors: uint64(v.sb.NewChunk),
			NewChunkBytes:   uint64(v.sb.NewChunk) * 512,
			Backwards:       fm&superblock.FeatureReshapeBackwards != 0,
		}
		if n, ok := layoutName(int(v.sb.NewLevel), v.sb.NewLayout, true); ok {
			if v.sb.NewLevel == 10 {
				n = r10LayoutShort(v.sb.NewLayout)
			}
			r.NewLayoutName = n
		}
		j.Reshape = r
	}
	if fl := v.sb.DevFlags; fl&superblock.DevFlagWriteMostly != 0 {
		j.Flags = append(j.Flags, "write-mostly")
	}
	if fl := v.sb.DevFlags; fl&superblock.DevFlagFailFast != 0 {
		j.Flags = append(j.Flags, "failfast")
	}
}

// v1JSONBadBlocks describes the bad-block log and the bad blocks it
// lists (nil when the device has no log).
func v1JSONBadBlocks(p *mdProbe) (*jsonBBLog, []jsonProblem) {
	v := p.v1
	if v.sb.BBLogSize == 0 || v.sb.BBLogOffset == 0 {
		return nil, nil
	}
	var problems []jsonProblem
	fm := v.sb.FeatureMap
	bb := &jsonBBLog{
		Entries:          int(v.sb.BBLogSize) * 512 / 8,
		OffsetSectors:    v.sb.BBLogOffset,
		SizeSectors:      v.sb.BBLogSize,
		Shift:            v.sb.BBLogShift,
		BadBlocksPresent: fm&superblock.FeatureBadBlocks != 0,
		BadBlocks:        []jsonBadBlock{},
	}
	off := (int64(v.sb.SuperOffset) + int64(v.sb.BBLogOffset)) * 512
	buf := make([]byte, int(v.sb.BBLogSize)*512)
	if off >= 0 {
		if n, err := p.m.ReadAt(buf, off); n == len(buf) {
			list, perr := superblock.ParseBadBlocks(buf, v.sb.BBLogShift)
			for _, b := range list {
				bb.BadBlocks = append(bb.BadBlocks, jsonBadBlock{b.Start, b.Len})
			}
			problems = append(problems, formatProblems("bad_block_log", perr)...)
		} else {
			problems = append(problems, jsonProblem{"bad_block_log", 0, "", fmt.Sprintf("cannot read the log at byte %d: %v", off, err)})
		}
	}
	return bb, problems
}

// v1JSONDeviceRole is the role of the device, as "Device Role" shows it.
func v1JSONDeviceRole(v *v1Probe) jsonRole {
	fm := v.sb.FeatureMap
	role := v.roleFromSB()
	switch {
	case role == superblock.RoleSpare:
		return jsonRole{Kind: "spare"}
	case role == superblock.RoleFaulty:
		return jsonRole{Kind: "faulty"}
	case role == superblock.RoleJournal:
		return jsonRole{Kind: "journal"}
	case fm&superblock.FeatureReplacement != 0:
		return jsonRole{Kind: "replacement", Slot: exIntp(int(role))}
	default:
		return jsonRole{Kind: "active", Slot: exIntp(int(role))}
	}
}

// v1JSONArrayState fills the Array State and the table of roles.
func v1JSONArrayState(j *jsonV1, v *v1Probe) {
	fm := v.sb.FeatureMap
	var deltaExtra uint32
	if fm&superblock.FeatureReshapeActive != 0 && v.sb.DeltaDisks < 0 {
		deltaExtra = uint32(-v.sb.DeltaDisks)
	}
	state, inconsistent := arrayStateV1(v, deltaExtra)
	j.ArrayState, j.ArrayStateConsistent = state, !inconsistent
	last := -1
	for i := 0; i < len(v.sb.DevRoles); i++ {
		if v.sb.DevRoles[i] != superblock.RoleSpare {
			last = i
		}
	}
	for i := 0; i <= last; i++ {
		kind, slot := v1RoleName(v.sb.DevRoles[i])
		j.Roles = append(j.Roles, jsonRoleEntry{i, kind, slot})
	}
}

// v1JSONBitmap summarizes the internal bitmap (nil when there is none or
// its header cannot be read).
func v1JSONBitmap(p *mdProbe) (*jsonBitmapSummary, []jsonProblem) {
	v := p.v1
	off, ok := v.loaded.BitmapOffset()
	if !ok || v.sb.FeatureMap&superblock.FeatureBitmapOffset == 0 {
		return nil, nil
	}
	var sum *jsonBitmapSummary
	h, area, berr := p.m.ReadBitmap(off, 0)
	if h != nil {
		total, dirty := bitmap.ExamineCounts(h, area)
		sum = &jsonBitmapSummary{
			OffsetSectors:      v.sb.BitmapOffset,
			Magic:              h.Magic,
			Version:            h.Version,
			UUID:               uuidText(h.UUID, ':'),
			Events:             h.Events,
			EventsCleared:      h.EventsCleared,
			State:              h.State,
			Stale:              h.State&bitmap.StateStale != 0,
			ChunkBytes:         h.ChunkSize,
			DaemonSleepSeconds: h.DaemonSleep,
			WriteBehind:        h.WriteBehind,
			SyncSizeSectors:    h.SyncSize,
			SyncSizeBytes:      h.SyncSize * 512,
			Bits:               total,
			Dirty:              dirty,
			Nodes:              h.Nodes,
			ClusterName:        string(cString(h.ClusterName[:])),
		}
	}
	return sum, formatProblems("bitmap", berr)
}

func exIndexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func disk090JSON(slot int, d [5]uint32) jsonDisk090 {
	names := []string{"faulty", "active", "sync", "removed", "cluster_add", "candidate"}
	st := []string{}
	for i, n := range names {
		if d[4]&(1<<i) != 0 {
			st = append(st, n)
		}
	}
	if d[4]&superblock.Disk090WriteMostly != 0 {
		st = append(st, "write-mostly")
	}
	if d[4]&superblock.Disk090FailFast != 0 {
		st = append(st, "failfast")
	}
	if d[4]&superblock.Disk090Replacement != 0 {
		st = append(st, "replacement")
	}
	if d[4]&superblock.Disk090Journal != 0 {
		st = append(st, "journal")
	}
	if d[4] == 0 {
		st = append(st, "spare")
	}
	return jsonDisk090{slot, d[0], d[1], d[2], d[3], st}
}

func v090JSON(v *v090Probe, homehost string) (*jsonV090, []jsonProblem) {
	sb := v.sb
	problems := formatProblems("superblock", v.err)
	if v.bitmapDropped {
		problems = append(problems, jsonProblem{"superblock", 0x84, "state",
			"bitmap present flag set but no valid bitmap 4 KiB after the superblock (mdadm clears the flag)"})
	}
	sum := superblock.Checksum090(v.mem[:superblock.Size090], false)
	u := sb.UUID()
	uuid := uuidText(u, ':')
	if sb.MinorVersion < 90 {
		uuid = fmt.Sprintf("%08x", sb.SetUUID0)
	}
	j := &jsonV090{
		Magic:            sb.Magic,
		Version:          fmt.Sprintf("%d.%02d.%02d", int32(sb.MajorVersion), int32(sb.MinorVersion), int32(sb.PatchVersion)),
		UUID:             uuid,
		NameLocal:        sb.MinorVersion >= 90 && v0Local(v, homehost),
		CreationTime:     timeRFC3339(int64(sb.CTime)),
		CreationTimeUnix: int64(sb.CTime),
		UpdateTime:       timeRFC3339(int64(sb.UTime)),
		UpdateTimeUnix:   int64(sb.UTime),
		Level:            sb.Level,
		LevelName:        levelName(int(sb.Level)),
		Layout:           sb.Layout,
		ChunkBytes:       sb.ChunkSize,
		UsedDevSizeKiB:   sb.Size,
		UsedDevSizeBytes: uint64(sb.Size) << 10,
		RaidDevices:      sb.RaidDisks,
		TotalDevices:     sb.NrDisks,
		PreferredMinor:   sb.MDMinor,
		NotPersistent:    sb.NotPersistent != 0,
		State090:         "active",
		BitmapPresent:    sb.State&superblock.SB090BitmapPresent != 0,
		ActiveDevices:    sb.ActiveDisks,
		WorkingDevices:   sb.WorkingDisks,
		FailedDevices:    sb.FailedDisks,
		SpareDevices:     sb.SpareDisks,
		Checksum090:      jsonChecksum{sb.Checksum, sum, sum == sb.Checksum},
		Events090:        sb.Events(),
		ThisDisk:         disk090JSON(-1, superblock.Disk090Words(v.mem, -1)),
		Disks:            []jsonDisk090{},
	}
	if n, ok := layoutName(int(sb.Level), sb.Layout, false); ok {
		if sb.Level == 10 {
			n = r10LayoutShort(sb.Layout)
		}
		j.LayoutName = n
	}
	if sb.State&superblock.SB090Clean != 0 {
		j.State090 = "clean"
	}
	if sb.Level > 0 {
		if dd, den, ok := dataDisksFactor(sb.Level, sb.RaidDisks, sb.Layout); ok {
			asize := (int64(sb.Size) << 10) * dd / den
			j.ArraySizeKiB = exPtr(uint64(asize >> 10))
			j.ArraySizeBytes = exPtr(uint64(asize))
		}
	}
	if sb.MinorVersion > 90 && sb.ReshapePosition+1 != 0 {
		j.Reshape090 = &jsonReshape090{sb.ReshapePosition, sb.DeltaDisks, sb.NewLevel, sb.NewLayout, sb.NewChunk}
	}
	for d := 0; d < superblock.Disks090; d++ {
		dk := superblock.Disk090Words(v.mem, d)
		if dk == [5]uint32{} {
			continue
		}
		j.Disks = append(j.Disks, disk090JSON(d, dk))
	}
	return j, problems
}
