package layout

import "mdtool/superblock"

// RAID10Geometry is md's raid10: near, far and offset copies
// (raid10.c setup_geo, calc_sectors, raid10_size, __raid10_find_phys,
// raid10_find_virt).
type RAID10Geometry struct {
	n          int // raid_disks
	nc, fc     int // near and far copies
	offset     bool
	farSetSize int
	chunk      uint64
	shift      uint
	devSectors uint64 // conf->dev_sectors
	stride     uint64 // member distance between far copies
	size       uint64
}

// NewRAID10 builds a raid10 geometry for the layout word, chunk and
// component size, with the checks of setup_geo/setup_conf: no bits at or
// above 19, chunk a power of two of at least a page, far-set version 0..2,
// and 2 <= copies <= raid_disks.
func NewRAID10(p Params) (*RAID10Geometry, error) {
	l := p.Layout
	if l < 0 || l>>maxRAID10LayoutBit != 0 {
		return nil, invalid("raid10: layout %#x has unknown bits", l)
	}
	if p.ChunkSectors < pageSectors || !isPow2(p.ChunkSectors) {
		return nil, invalid("raid10: chunk %d sectors is not a power of two of at least a page", p.ChunkSectors)
	}
	n := p.RaidDisks
	g := &RAID10Geometry{
		n:      n,
		nc:     superblock.RAID10Near(uint32(l)),
		fc:     superblock.RAID10Far(uint32(l)),
		offset: superblock.RAID10Offset(uint32(l)),
		chunk:  p.ChunkSectors,
		shift:  log2(p.ChunkSectors),
	}
	if g.nc == 0 || g.fc == 0 {
		return nil, invalid("raid10: layout %#x has zero near or far copies", l)
	}
	switch l >> 17 {
	case 0:
		g.farSetSize = n
	case 1:
		g.farSetSize = n / g.fc
	case 2:
		g.farSetSize = g.fc * g.nc
	default:
		return nil, invalid("raid10: layout %#x has unknown far-set version", l)
	}
	copies := g.nc * g.fc
	if copies < 2 || copies > n {
		return nil, invalid("raid10: %d copies on %d devices", copies, n)
	}
	if g.farSetSize == 0 {
		return nil, invalid("raid10: far-set size 0 (layout %#x, %d devices)", l, n)
	}
	// calc_sectors
	s := p.ComponentSectors >> g.shift
	s /= uint64(g.fc)
	s *= uint64(n)
	s /= uint64(g.nc)
	s *= uint64(copies)
	s = (s + uint64(n) - 1) / uint64(n)
	g.devSectors = s << g.shift
	if g.offset {
		g.stride = g.chunk
	} else {
		g.stride = s / uint64(g.fc) << g.shift
	}
	// raid10_size
	t := g.devSectors >> g.shift
	t /= uint64(g.fc)
	t *= uint64(n)
	t /= uint64(g.nc)
	g.size = t << g.shift
	return g, nil
}

func (g *RAID10Geometry) Level() Level               { return RAID10 }
func (g *RAID10Geometry) RaidDisks() int             { return g.n }
func (g *RAID10Geometry) ChunkSectors() uint64       { return g.chunk }
func (g *RAID10Geometry) ArraySectors() uint64       { return g.size }
func (g *RAID10Geometry) DevSectors(role int) uint64 { return g.devSectors }
func (g *RAID10Geometry) MaxCopies() int             { return g.nc * g.fc }

// NearCopies, FarCopies and Offset decode the layout.
func (g *RAID10Geometry) NearCopies() int { return g.nc }
func (g *RAID10Geometry) FarCopies() int  { return g.fc }
func (g *RAID10Geometry) Offset() bool    { return g.offset }

// FarSetSize is the number of devices a far copy rotates within.
func (g *RAID10Geometry) FarSetSize() int { return g.farSetSize }

// Stride is the member-sector distance between successive far copies.
func (g *RAID10Geometry) Stride() uint64 { return g.stride }

// IOMin is the chunk size in bytes.
func (g *RAID10Geometry) IOMin() uint64 { return g.chunk << 9 }

// IOOpt is chunk × raid_disks/near_copies in bytes, or chunk × raid_disks
// when near_copies does not divide raid_disks (raid10_set_io_opt).
func (g *RAID10Geometry) IOOpt() uint64 {
	d := g.n
	if d%g.nc == 0 {
		d /= g.nc
	}
	return g.chunk << 9 * uint64(d)
}

// Map implements Geometry. The copies come in the kernel's r10bio slot
// order: for each near copy, the copy itself followed by its far copies.
func (g *RAID10Geometry) Map(s uint64, dst []Loc) ([]Loc, uint64) {
	n := g.n
	fss := g.farSetSize
	lastStart := (n/fss - 1) * fss
	lastSize := fss + n%fss

	chunk := s >> g.shift
	sector := s & (g.chunk - 1)
	run := g.chunk - sector
	chunk *= uint64(g.nc)
	stripe := chunk / uint64(n)
	dev := int(chunk % uint64(n))
	if g.offset {
		stripe *= uint64(g.fc)
	}
	sector += stripe << g.shift

	dst = dst[:0]
	for i := 0; i < g.nc; i++ {
		d := dev
		ds := sector
		dst = append(dst, Loc{Role: d, Sector: ds})
		for f := 1; f < g.fc; f++ {
			set := d / fss
			d += g.nc
			if n%fss != 0 && d > lastStart {
				d -= lastStart
				d %= lastSize
				d += lastStart
			} else {
				d %= fss
				d += fss * set
			}
			ds += g.stride
			dst = append(dst, Loc{Role: d, Sector: ds})
		}
		dev++
		if dev >= n {
			dev = 0
			sector += g.chunk
		}
	}
	return dst, run
}

// Unmap implements Geometry (raid10_find_virt, then checked against Map so
// that member space holding no copy reports ok == false).
func (g *RAID10Geometry) Unmap(role int, sector uint64) (uint64, bool) {
	if role < 0 || role >= g.n || sector >= g.devSectors || g.size == 0 {
		return 0, false
	}
	v := g.findVirt(role, sector)
	if v >= g.size {
		return 0, false
	}
	var buf [16]Loc
	var locs []Loc
	if g.MaxCopies() <= len(buf) {
		locs, _ = g.Map(v, buf[:0])
	} else {
		locs, _ = g.Map(v, nil)
	}
	for _, l := range locs {
		if l.Role == role && l.Sector == sector {
			return v, true
		}
	}
	return 0, false
}

func (g *RAID10Geometry) findVirt(dev int, sector uint64) uint64 {
	fss := g.farSetSize
	setStart := dev / fss * fss
	setSize := fss
	if g.n%fss != 0 {
		lastStart := (g.n/fss - 1) * fss
		if dev >= lastStart {
			setSize = fss + g.n%fss
			setStart = lastStart
		}
	}
	offset := sector & (g.chunk - 1)
	var chunk uint64
	if g.offset {
		chunk = sector >> g.shift
		fc := int(chunk % uint64(g.fc))
		chunk /= uint64(g.fc)
		dev -= fc * g.nc
		if dev < setStart {
			dev += setSize
		}
	} else {
		for sector >= g.stride {
			sector -= g.stride
			if dev < g.nc+setStart {
				dev += setSize - g.nc
			} else {
				dev -= g.nc
			}
		}
		chunk = sector >> g.shift
	}
	vchunk := chunk*uint64(g.n) + uint64(dev)
	vchunk /= uint64(g.nc)
	return vchunk<<g.shift + offset
}
