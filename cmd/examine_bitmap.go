package cmd

// examine-bitmap (mdadm --examine-bitmap, -X): print the write-intent
// bitmap of member devices exactly as mdadm 4.2 prints it.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"mdtool/bitmap"
	"mdtool/ioctl"
	"mdtool/superblock"
)

const examineBitmapLong = `Print the write-intent bitmap of each DEVICE, as "mdadm --examine-bitmap" (-X)
does, with identical text.

DEVICE may be a member block device or a plain image file of one (mdadm 4.2
reads an image file as a bitmap file and prints nonsense; mdtool finds the
superblock and its internal bitmap as it would on a block device). A file
that starts with a bitmap superblock is read as a legacy external bitmap
file. For clustered bitmaps the header is followed by one block per node;
mdtool lists at most the node blocks that fit between the bitmap and the
data (a larger nodes field is damage: it says so and lists those).
Version 6 (the experimental "lockless" bitmap of mdadm 4.6) is recognised
and reported as such; its chunks are not counted.

A member without an internal bitmap gives "DEV doesn't have bitmap" and exit
status 1 (mdadm's behaviour); so does a device whose bitmap has a bad magic
or an unknown version, after printing what was read, as mdadm does.

  --brief, -b   leave out the bit counts (mdadm -Xb)
  --json        one JSON document instead of text (mdadm has none)

JSON output is an array with one object per device: device, source
("internal" or "file"), metadata ("1.x" minor or "0.90"; "" for a file or
no superblock), offset_bytes (where the bitmap superblock is), magic,
version, lockless, uuid, events, events_cleared, state, state_name
("OK", "Out of date", "Unknown"), stale, chunk_bytes, daemon_sleep_seconds,
write_behind, sync_size_sectors, sync_size_bytes, sectors_reserved, bits,
dirty, dirty_percent, truncated (the device ends before the bit array
does), nodes, cluster_name, node_bitmaps (clustered: one object per node
with node, offset_bytes, magic, events, events_cleared, state, state_name,
bits, dirty, dirty_percent), error, and problems (list of {area, offset,
field, message} for what the kernel would refuse).`

type examineBitmapOptions struct {
	brief, json bool
}

func newExamineBitmapCmd(env *Env) *cobra.Command {
	o := &examineBitmapOptions{}
	c := &cobra.Command{
		Use:   "examine-bitmap [flags] DEVICE...",
		Short: "Print the write-intent bitmap of member devices (mdadm --examine-bitmap)",
		Long:  examineBitmapLong,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exitf(ExitUsage, "No devices given.")
			}
			return runExamineBitmap(env, o, args)
		},
	}
	c.Flags().BoolVarP(&o.brief, "brief", "b", false, "do not count the bits")
	c.Flags().BoolVar(&o.json, "json", false, "print one JSON document")
	return c
}

// bitmapSource says where a device's bitmap is, as bitmap_file_open and
// locate_bitmap decide it.
type bitmapSource struct {
	p        *mdProbe
	off      int64 // byte offset of the bitmap superblock (node 0)
	file     bool  // a bitmap file (or a device read from its start)
	swapUUID bool  // print the uuid bytes in stored order (else as LE words)
	metadata string
	// nodeOffset returns the offset of node i's bitmap given node 0's
	// header bytes.
	nodeOffset func(i int, hdr0 *bitmap.Header) int64
	// space is the bytes from off that the node bitmaps may take: up to
	// the data or the superblock on a v1.x device, or the device's end.
	space int64
}

// bitmapRead is what bitmap_fd_read returns.
type bitmapRead struct {
	h         *bitmap.Header // as read, whatever its magic and version
	total     uint64
	dirty     uint64
	truncated bool
	parseErr  error
}

func (r *bitmapRead) magic() uint32   { return r.h.Magic }
func (r *bitmapRead) version() uint32 { return r.h.Version }

// readBitmapAt is bitmap_fd_read at byte offset off: the header, and unless
// brief (or sync_size or chunksize is 0) the count of the bits; a device
// that ends before the bits do counts what is there. limit > 0 bounds
// the bytes read from off (a node's slot of a clustered bitmap).
func readBitmapAt(p *mdProbe, off int64, brief bool, limit ...int64) (*bitmapRead, error) {
	hdr := make([]byte, bitmap.HeaderSize)
	n, err := p.m.ReadAt(hdr, off)
	if n < bitmap.HeaderSize {
		if err == nil || err == io.EOF {
			return nil, fmt.Errorf("failed to read superblock of bitmap file: Success")
		}
		return nil, fmt.Errorf("failed to read superblock of bitmap file: %s", strerror(err))
	}
	r := &bitmapRead{}
	r.h, _ = bitmap.Decode(hdr)
	if r.magic() == bitmap.Magic {
		_, r.parseErr = bitmap.Parse(hdr)
	}
	if brief || r.h.SyncSize == 0 || r.h.ChunkSize == 0 {
		return r, nil
	}
	want := r.h.Chunks()
	nbytes := (want + 7) / 8
	avail := int64(p.size) - off - bitmap.HeaderSize
	if len(limit) > 0 && limit[0] > 0 {
		avail = min(avail, limit[0]-bitmap.HeaderSize)
	}
	if avail < int64(nbytes) {
		if avail < 0 {
			avail = 0
		}
		nbytes = uint64(avail)
	}
	area := make([]byte, bitmap.HeaderSize+nbytes)
	got, _ := p.m.ReadAt(area, off)
	area = area[:got]
	r.total, r.dirty = bitmap.ExamineCounts(r.h, area)
	if r.total < want {
		r.truncated = true
	}
	return r, nil
}

// clusterNodes is how many node bitmaps to list, and how many fit. mdadm
// lists nodes (as an int: none when it is negative) node bitmaps, each
// calc_bitmap_size(node 0's header, 4096) further; a valid clustered
// bitmap has room for all of them (mdadm's write_bitmap1 refuses more
// nodes than fit: "The max num of nodes can't exceed"). A damaged nodes
// field is cut to the node bitmaps that fit in the bitmap area, so that
// it costs no more than reading that area.
func (src *bitmapSource) clusterNodes(nodes uint32, hdr0 *bitmap.Header) (n, fit int) {
	n = int(int32(nodes))
	if n <= 0 {
		return max(n, 0), 0
	}
	per := max(int64(calcBitmapSize(hdr0, 4096)), 4096) // (a 32-bit size that wrapped)
	fit = int(min(max(src.space/per, 1), int64(n)))
	return min(n, fit), fit
}

// nodeSlot is the bytes of one node's bitmap (header and bits) of a
// clustered bitmap on a v1.x device: what mdadm steps by from node to
// node. Elsewhere every node reads the same bitmap: no bound.
func (src *bitmapSource) nodeSlot(hdr0 *bitmap.Header) int64 {
	if src.metadata != "1.0" && src.metadata != "1.1" && src.metadata != "1.2" {
		return 0
	}
	return max(int64(calcBitmapSize(hdr0, 4096)), 4096)
}

// bitmapStateName is mdadm's bitmap_state: "OK" for 0, "Out of date" for
// 2 (the stale bit alone), "Unknown" otherwise.
func bitmapStateName(state uint32) string {
	switch state {
	case 0:
		return "OK"
	case 2:
		return "Out of date"
	}
	return "Unknown"
}

func dirtyPercent(dirty, total uint64) float64 {
	if total == 0 {
		total = 1
	}
	return 100.0 * float64(dirty) / float64(total)
}

// locateBitmap is bitmap_file_open for one device. It returns the
// message mdadm prints when there is no bitmap to read.
func locateBitmap(path string) (*bitmapSource, error) {
	p, err := probeDevice(path)
	if err != nil {
		if oe := err.(*openError); errors.Is(oe.err, ioctl.ErrNotMember) {
			return nil, errors.New(oe.Error())
		}
		return nil, fmt.Errorf("failed to open bitmap file %s: %s", path, strerror(err.(*openError).err))
	}
	if p.m == nil {
		p.close()
		return nil, fmt.Errorf("failed to read superblock of bitmap file: Invalid argument")
	}
	src := &bitmapSource{p: p, swapUUID: true}
	st, _ := os.Stat(path)
	if st != nil && st.Mode().IsRegular() {
		magic := make([]byte, 4)
		if n, _ := p.m.ReadAt(magic, 0); n == 4 && bitmap.HasMagic(magic) {
			src.file = true
			src.nodeOffset = func(int, *bitmap.Header) int64 { return 0 }
			return src, nil
		}
	}
	switch p.kind {
	case kindNone:
		// "just look at device..."
		src.file = true
		src.nodeOffset = func(int, *bitmap.Header) int64 { return 0 }
	case kindMBR:
		p.close()
		return nil, fmt.Errorf("No bitmap possible with mbr metadata")
	case kindV090:
		src.metadata = "0.90"
		src.swapUUID = false
		src.off = int64(p.v0.offset) + 4096
		src.nodeOffset = func(int, *bitmap.Header) int64 { return src.off }
	case kindV1:
		sb := p.v1.sb
		src.metadata = fmt.Sprintf("1.%d", sb.Minor())
		if sb.FeatureMap&superblock.FeatureBitmapOffset == 0 {
			p.close()
			return nil, fmt.Errorf("%s doesn't have bitmap", path)
		}
		base := int64(sb.SuperOffset) + int64(sb.BitmapOffset)
		src.off = base * 512
		// The node bitmaps lie between the bitmap and the data (1.1,
		// 1.2) or the superblock (1.0). The bad-block log is not a
		// bound: neither mdadm nor md-cluster checks it.
		end := int64(p.size >> 9)
		for _, e := range []int64{int64(sb.DataOffset), int64(sb.SuperOffset)} {
			if e > base && e < end {
				end = e
			}
		}
		src.space = (end - base) * 512
		src.nodeOffset = func(i int, _ *bitmap.Header) int64 {
			per := int64(calcBitmapSize(p.v1.bm, 4096) >> 9)
			return (base + per*int64(i)) * 512
		}
	}
	if src.off < 0 {
		src.off = 0
	}
	if src.space <= 0 || src.metadata != "1.0" && src.metadata != "1.1" && src.metadata != "1.2" {
		// files, 0.90, bare devices: every node reads the same place;
		// bound it by the device.
		src.space = max(int64(p.size)-src.off, 0)
	}
	return src, nil
}

// runExamineBitmap is mdadm's loop over ExamineBitmap.
func runExamineBitmap(env *Env, o *examineBitmapOptions, devs []string) error {
	out := &bytes.Buffer{}
	rv := ExitOK
	var docs []*jsonBitmapDoc
	for _, dev := range devs {
		if o.json {
			d, code := examineBitmapJSON(env, dev, o.brief)
			docs = append(docs, d)
			rv |= code
			continue
		}
		rv |= examineBitmapText(env, out, dev, o.brief)
	}
	if o.json {
		if docs == nil {
			docs = []*jsonBitmapDoc{}
		}
		if err := writeJSONDoc(out, docs); err != nil {
			return exitf(ExitFailure, "%v", err)
		}
	}
	if _, err := env.Stdout.Write(out.Bytes()); err != nil {
		return exitf(ExitFailure, "write: %v", err)
	}
	if rv != ExitOK {
		return &ExitError{Code: rv}
	}
	return nil
}

// bitmapUUIDText prints the bitmap uuid as ExamineBitmap does: the bytes
// in stored order for v1.x and bitmap files, as little-endian words for
// 0.90 (swapuuid 0).
func bitmapUUIDText(u [16]byte, swap bool) string {
	if swap {
		return uuidText(u, ':')
	}
	var w [4]uint32
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(u[4*i:])
	}
	return uuidWordsText(w, ':')
}

// examineBitmapText is ExamineBitmap: it returns 1 on failure.
func examineBitmapText(env *Env, out io.Writer, dev string, brief bool) ExitCode {
	errf := func(format string, a ...any) { fmt.Fprintf(env.Stderr, "mdtool: "+format, a...) }
	src, err := locateBitmap(dev)
	if err != nil {
		errf("%s\n", err)
		return ExitFailure
	}
	defer src.p.close()
	r, err := readBitmapAt(src.p, src.off, brief)
	if err != nil {
		errf("%s\n", err)
		return ExitFailure
	}
	if r.truncated {
		errf("WARNING: bitmap file is not large enough for array size %d!\n\n", r.h.SyncSize)
	}
	p := func(format string, a ...any) { fmt.Fprintf(out, format, a...) }
	if r.magic() != bitmap.Magic {
		errf("This is an md array.  To view a bitmap you need to examine\n")
		errf("a member device, not the array.\n")
		errf("Reporting bitmap that would be used if this array were used\n")
		errf("as a member of some other array\n")
	}
	p("        Filename : %s\n", dev)
	p("           Magic : %08x\n", r.magic())
	if r.magic() != bitmap.Magic {
		errf("invalid bitmap magic 0x%x, the bitmap file appears\n", r.magic())
		errf("to be corrupted or missing.\n")
	}
	p("         Version : %d\n", int32(r.version()))
	lockless := r.version() == bitmap.VersionLockless
	if (r.version() < bitmap.VersionHostEndian || r.version() > bitmap.VersionClustered) && !lockless {
		errf("unknown bitmap version %d, either the bitmap file\n", int32(r.version()))
		errf("is corrupted or you need to upgrade your tools\n")
		return ExitFailure
	}
	h := r.h
	p("            UUID : %s\n", bitmapUUIDText(r.h.UUID, src.swapUUID))
	if h.Nodes == 0 {
		p("          Events : %d\n", h.Events)
		p("  Events Cleared : %d\n", h.EventsCleared)
		p("           State : %s\n", bitmapStateName(h.State))
	}
	p("       Chunksize : %s\n", humanChunksize(uint64(h.ChunkSize)))
	p("          Daemon : %ds flush period\n", int32(h.DaemonSleep))
	if h.WriteBehind != 0 {
		p("      Write Mode : Allow write behind, max %d\n", int32(h.WriteBehind))
	} else {
		p("      Write Mode : Normal\n")
	}
	p("       Sync Size : %d%s\n", h.SyncSize/2, humanSize(int64(h.SyncSize*512)))
	if lockless {
		// Not in mdadm 4.2, which rejects version 6.
		p("          Bitmap : lockless (llbitmap, version 6); chunks not counted\n")
		return ExitOK
	}
	if h.Nodes == 0 {
		if brief {
			return ExitOK
		}
		p("          Bitmap : %d bits (chunks), %d dirty (%2.1f%%)\n", r.total, r.dirty, dirtyPercent(r.dirty, r.total))
		return ExitOK
	}
	p("   Cluster nodes : %d\n", int32(h.Nodes))
	p("    Cluster name : %-64s\n", r.h.ClusterNameC())
	nodes, fit := src.clusterNodes(h.Nodes, r.h)
	if nodes < int(int32(h.Nodes)) {
		errf("cluster nodes %d: only %d node bitmaps fit in the bitmap area; listing those\n", int32(h.Nodes), fit)
	}
	for i := 0; i < nodes; i++ {
		nr, err := readBitmapAt(src.p, src.nodeOffset(i, r.h), brief, src.nodeSlot(r.h))
		if err != nil {
			p("   Unable to read bitmap on node: %d\n", i)
			continue
		}
		if nr.truncated {
			errf("WARNING: bitmap file is not large enough for array size %d!\n\n", nr.h.SyncSize)
		}
		if nr.magic() != bitmap.Magic {
			errf("invalid bitmap magic 0x%x, the bitmap file appears to be corrupted\n", nr.magic())
		}
		p("       Node Slot : %d\n", i)
		p("          Events : %d\n", nr.h.Events)
		p("  Events Cleared : %d\n", nr.h.EventsCleared)
		p("           State : %s\n", bitmapStateName(nr.h.State))
		if brief {
			continue
		}
		p("          Bitmap : %d bits (chunks), %d dirty (%2.1f%%)\n", nr.total, nr.dirty, dirtyPercent(nr.dirty, nr.total))
	}
	return ExitOK
}

// jsonNodeBitmap is one node's bitmap of a clustered bitmap.
type jsonNodeBitmap struct {
	Node          int     `json:"node"`
	OffsetBytes   int64   `json:"offset_bytes"`
	Magic         uint32  `json:"magic"`
	Events        uint64  `json:"events"`
	EventsCleared uint64  `json:"events_cleared"`
	State         uint32  `json:"state"`
	StateName     string  `json:"state_name"`
	Bits          uint64  `json:"bits"`
	Dirty         uint64  `json:"dirty"`
	DirtyPercent  float64 `json:"dirty_percent"`
}

// jsonBitmapDoc is one device of examine-bitmap --json. The document is
// an array of these, one per DEVICE in order; members follow the
// conventions of jsonExamine (units in names, "error" only on failure,
// "problems" only when there are any), "bits"/"dirty"/"dirty_percent" are
// left out with --brief and for lockless bitmaps, and "node_bitmaps" is
// present only for clustered bitmaps (nodes > 0). The schema is listed in
// the command's help too.
type jsonBitmapDoc struct {
	Device             string           `json:"device"`
	Error              string           `json:"error,omitempty"`
	Source             string           `json:"source,omitempty"`
	Metadata           string           `json:"metadata"`
	OffsetBytes        *int64           `json:"offset_bytes,omitempty"`
	Magic              *uint32          `json:"magic,omitempty"`
	Version            *uint32          `json:"version,omitempty"`
	Lockless           bool             `json:"lockless"`
	UUID               string           `json:"uuid,omitempty"`
	Events             uint64           `json:"events"`
	EventsCleared      uint64           `json:"events_cleared"`
	State              uint32           `json:"state"`
	StateName          string           `json:"state_name,omitempty"`
	Stale              bool             `json:"stale"`
	ChunkBytes         uint32           `json:"chunk_bytes"`
	DaemonSleepSeconds uint32           `json:"daemon_sleep_seconds"`
	WriteBehind        uint32           `json:"write_behind"`
	SyncSizeSectors    uint64           `json:"sync_size_sectors"`
	SyncSizeBytes      uint64           `json:"sync_size_bytes"`
	SectorsReserved    uint32           `json:"sectors_reserved"`
	Bits               *uint64          `json:"bits,omitempty"`
	Dirty              *uint64          `json:"dirty,omitempty"`
	DirtyPercent       *float64         `json:"dirty_percent,omitempty"`
	Truncated          bool             `json:"truncated"`
	Nodes              uint32           `json:"nodes"`
	ClusterName        string           `json:"cluster_name,omitempty"`
	NodeBitmaps        []jsonNodeBitmap `json:"node_bitmaps,omitempty"`
	Problems           []jsonProblem    `json:"problems,omitempty"`
}

// examineBitmapJSON describes one device's bitmap; the exit status is that
// of the text form.
func examineBitmapJSON(env *Env, dev string, brief bool) (*jsonBitmapDoc, ExitCode) {
	d := &jsonBitmapDoc{Device: dev}
	fail := func(err error) (*jsonBitmapDoc, ExitCode) {
		fmt.Fprintf(env.Stderr, "mdtool: %s\n", err)
		d.Error = err.Error()
		return d, ExitFailure
	}
	src, err := locateBitmap(dev)
	if err != nil {
		return fail(err)
	}
	defer src.p.close()
	d.Source = "internal"
	if src.file {
		d.Source = "file"
	}
	d.Metadata = src.metadata
	d.OffsetBytes = exPtr(src.off)
	r, err := readBitmapAt(src.p, src.off, brief)
	if err != nil {
		return fail(err)
	}
	d.Magic, d.Version = exPtr(r.magic()), exPtr(r.version())
	if r.magic() != bitmap.Magic {
		return fail(fmt.Errorf("invalid bitmap magic 0x%x at byte %d", r.magic(), src.off))
	}
	h := r.h
	d.Lockless = h.Version == bitmap.VersionLockless
	d.UUID = bitmapUUIDText(r.h.UUID, src.swapUUID)
	d.Events, d.EventsCleared, d.State = h.Events, h.EventsCleared, h.State
	d.StateName = bitmapStateName(h.State)
	d.Stale = h.State&bitmap.StateStale != 0
	d.ChunkBytes, d.DaemonSleepSeconds, d.WriteBehind = h.ChunkSize, h.DaemonSleep, h.WriteBehind
	d.SyncSizeSectors, d.SyncSizeBytes = h.SyncSize, h.SyncSize*512
	d.SectorsReserved = h.SectorsReserved
	d.Nodes = h.Nodes
	d.ClusterName = string(cString(h.ClusterName[:]))
	d.Problems = formatProblems("bitmap", r.parseErr)
	if (h.Version < bitmap.VersionHostEndian || h.Version > bitmap.VersionClustered) && !d.Lockless {
		return fail(fmt.Errorf("unknown bitmap version %d", int32(h.Version)))
	}
	d.Truncated = r.truncated
	if !brief && !d.Lockless {
		d.Bits, d.Dirty, d.DirtyPercent = exPtr(r.total), exPtr(r.dirty), exPtr(dirtyPercent(r.dirty, r.total))
	}
	nodes, fit := src.clusterNodes(h.Nodes, r.h)
	if nodes < int(int32(h.Nodes)) && !d.Lockless {
		d.Problems = append(d.Problems, jsonProblem{"bitmap", src.off, "nodes",
			fmt.Sprintf("%d nodes, only %d node bitmaps fit in the bitmap area", int32(h.Nodes), fit)})
	}
	for i := 0; i < nodes && !d.Lockless; i++ {
		off := src.nodeOffset(i, r.h)
		nr, err := readBitmapAt(src.p, off, brief, src.nodeSlot(r.h))
		if err != nil {
			d.Problems = append(d.Problems, jsonProblem{"bitmap", off, "", fmt.Sprintf("node %d: %v", i, err)})
			continue
		}
		d.NodeBitmaps = append(d.NodeBitmaps, jsonNodeBitmap{
			Node: i, OffsetBytes: off, Magic: nr.magic(), Events: nr.h.Events,
			EventsCleared: nr.h.EventsCleared, State: nr.h.State, StateName: bitmapStateName(nr.h.State),
			Bits: nr.total, Dirty: nr.dirty, DirtyPercent: dirtyPercent(nr.dirty, nr.total),
		})
	}
	return d, ExitOK
}
