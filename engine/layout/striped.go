package layout

// Striped is the raid4/raid5/raid6 geometry (raid5.c raid5_compute_sector,
// raid5_size, raid6_d0, raid6_idx_to_slot).
//
// A stripe (row) is chunk sectors deep on every member: member sectors
// [stripe*chunk, (stripe+1)*chunk) of every role. It holds DataDisks()
// data chunks, which are array chunks stripe*DataDisks() ..
// stripe*DataDisks()+DataDisks()-1 in "logical data index" order, plus P
// (and Q for raid6).
type Striped struct {
	level      Level
	algo       int
	n          int // raid_disks
	k          int // data disks
	chunk      uint64
	devSectors uint64
	ddf        bool
}

// NewStriped builds a raid4, raid5 or raid6 geometry with the checks of
// raid5.c setup_conf: chunk a power of two and a multiple of a page, a
// layout valid for the level (raid4 ignores the layout), and at least one
// data disk. Member size is ComponentSectors rounded down to the chunk.
func NewStriped(p Params) (*Striped, error) {
	g := &Striped{level: p.Level, algo: p.Layout, n: p.RaidDisks, chunk: p.ChunkSectors}
	switch p.Level {
	case RAID4:
		g.k = g.n - 1
		g.algo = ParityLast
	case RAID5:
		if p.Layout < 0 || p.Layout > ParityLast {
			return nil, invalid("raid5: layout %d not supported", p.Layout)
		}
		g.k = g.n - 1
	case RAID6:
		switch {
		case p.Layout >= 0 && p.Layout <= ParityLast:
		case p.Layout >= DDFZeroRestart && p.Layout <= DDFNContinue:
			g.ddf = true
		case p.Layout >= LeftAsymmetric6 && p.Layout <= ParityFirst6:
		default:
			return nil, invalid("raid6: layout %d not supported", p.Layout)
		}
		g.k = g.n - 2
	default:
		return nil, invalid("striped: level %d is not 4, 5 or 6", int(p.Level))
	}
	if g.k < 1 || (g.level == RAID6 && p.Layout >= LeftAsymmetric6 && g.n < 3) {
		return nil, invalid("%v: %d devices leave no data disk", p.Level, g.n)
	}
	if !isPow2(g.chunk) || g.chunk%pageSectors != 0 {
		return nil, invalid("%v: chunk %d sectors is not a power of two multiple of a page", p.Level, g.chunk)
	}
	g.devSectors = p.ComponentSectors &^ (g.chunk - 1)
	if g.devSectors*uint64(g.k)/uint64(g.k) != g.devSectors {
		return nil, invalid("%v: size overflow", p.Level)
	}
	return g, nil
}

func (g *Striped) Level() Level               { return g.level }
func (g *Striped) RaidDisks() int             { return g.n }
func (g *Striped) ChunkSectors() uint64       { return g.chunk }
func (g *Striped) ArraySectors() uint64       { return g.devSectors * uint64(g.k) }
func (g *Striped) DevSectors(role int) uint64 { return g.devSectors }
func (g *Striped) MaxCopies() int             { return 1 }

// Algorithm is the layout in use (ParityLast for raid4).
func (g *Striped) Algorithm() int { return g.algo }

// DataDisks is the number of data chunks per stripe.
func (g *Striped) DataDisks() int { return g.k }

// Stripes is the number of stripes (rows) in the array.
func (g *Striped) Stripes() uint64 { return g.devSectors / g.chunk }

// StripeSectors is the data in one full stripe, in array sectors
// (chunk × data disks).
func (g *Striped) StripeSectors() uint64 { return g.chunk * uint64(g.k) }

// DDF reports a raid6 DDF layout (8, 9, 10): Q runs over all devices in
// device order with P and Q treated as zero blocks.
func (g *Striped) DDF() bool { return g.ddf }

// SyndromeDisks is the number of Q coefficient slots of a raid6 stripe:
// raid_disks for DDF layouts, raid_disks-2 otherwise; 0 for raid4/5.
func (g *Striped) SyndromeDisks() int {
	switch {
	case g.level != RAID6:
		return 0
	case g.ddf:
		return g.n
	}
	return g.n - 2
}

// IOMin is the chunk size in bytes.
func (g *Striped) IOMin() uint64 { return g.chunk << 9 }

// IOOpt is the full stripe in bytes: chunk × data disks.
func (g *Striped) IOOpt() uint64 { return g.chunk << 9 * uint64(g.k) }

// parity returns the P and Q roles of a stripe (Q = -1 for raid4/5).
func (g *Striped) parity(stripe uint64) (pd, qd int) {
	n := g.n
	r := int(stripe % uint64(n))
	switch g.level {
	case RAID4:
		return n - 1, -1
	case RAID5:
		switch g.algo {
		case LeftAsymmetric, LeftSymmetric:
			return n - 1 - r, -1
		case RightAsymmetric, RightSymmetric:
			return r, -1
		case ParityFirst:
			return 0, -1
		}
		return n - 1, -1 // ParityLast
	}
	switch g.algo {
	case LeftAsymmetric, LeftSymmetric:
		pd = n - 1 - r
	case RightAsymmetric, RightSymmetric, DDFZeroRestart:
		pd = r
	case DDFNRestart:
		pd = n - 1 - int((stripe+1)%uint64(n))
	case DDFNContinue:
		pd = n - 1 - r
		return pd, (pd + n - 1) % n
	case ParityFirst:
		return 0, 1
	case ParityLast:
		return n - 2, n - 1
	case LeftAsymmetric6, LeftSymmetric6:
		return n - 2 - int(stripe%uint64(n-1)), n - 1
	case RightAsymmetric6, RightSymmetric6:
		return int(stripe % uint64(n-1)), n - 1
	case ParityFirst6:
		return 0, n - 1
	}
	// rotating P with Q right after it (wrapping to 0)
	return pd, (pd + 1) % n
}

// dataRole returns the role holding logical data index dd of a stripe
// whose parity roles are pd, qd.
func (g *Striped) dataRole(dd, pd int) int {
	n := g.n
	switch g.level {
	case RAID4:
		return dd
	case RAID5:
		switch g.algo {
		case LeftAsymmetric, RightAsymmetric:
			if dd >= pd {
				dd++
			}
			return dd
		case LeftSymmetric, RightSymmetric:
			return (pd + 1 + dd) % n
		case ParityFirst:
			return dd + 1
		}
		return dd
	}
	switch g.algo {
	case LeftAsymmetric, RightAsymmetric, DDFZeroRestart, DDFNRestart:
		if pd == n-1 {
			return dd + 1 // Q D D D P
		}
		if dd >= pd {
			return dd + 2 // D D P Q D
		}
		return dd
	case LeftSymmetric, RightSymmetric:
		return (pd + 2 + dd) % n
	case DDFNContinue:
		return (pd + 1 + dd) % n
	case ParityFirst:
		return dd + 2
	case LeftAsymmetric6, RightAsymmetric6:
		if dd >= pd {
			dd++
		}
		return dd
	case LeftSymmetric6, RightSymmetric6:
		return (pd + 1 + dd) % (n - 1)
	case ParityFirst6:
		return dd + 1
	}
	return dd // ParityLast
}

// dataIndex is the inverse of dataRole for a role that is neither P nor Q.
func (g *Striped) dataIndex(role, pd int) int {
	n := g.n
	switch g.level {
	case RAID4:
		return role
	case RAID5:
		switch g.algo {
		case LeftAsymmetric, RightAsymmetric:
			if role > pd {
				role--
			}
			return role
		case LeftSymmetric, RightSymmetric:
			return (role - pd - 1 + 2*n) % n
		case ParityFirst:
			return role - 1
		}
		return role
	}
	switch g.algo {
	case LeftAsymmetric, RightAsymmetric, DDFZeroRestart, DDFNRestart:
		if pd == n-1 {
			return role - 1
		}
		if role > pd {
			return role - 2
		}
		return role
	case LeftSymmetric, RightSymmetric:
		return (role - pd - 2 + 2*n) % n
	case DDFNContinue:
		return (role - pd - 1 + 2*n) % n
	case ParityFirst:
		return role - 2
	case LeftAsymmetric6, RightAsymmetric6:
		if role > pd {
			role--
		}
		return role
	case LeftSymmetric6, RightSymmetric6:
		return (role - pd - 1 + 2*(n-1)) % (n - 1)
	case ParityFirst6:
		return role - 1
	}
	return role
}

// slot returns the Q coefficient exponent of the data block on role
// (raid6_d0 / raid6_idx_to_slot): DDF layouts number all devices in device
// order; md layouts walk from the device after Q (device 0 when Q is last),
// skipping P and Q.
func (g *Striped) slot(role, pd, qd int) int {
	if g.ddf {
		return role
	}
	n := g.n
	d0 := qd + 1
	if qd == n-1 {
		d0 = 0
	}
	rel := (role - d0 + n) % n
	s := rel
	if (pd-d0+n)%n < rel {
		s--
	}
	if (qd-d0+n)%n < rel {
		s--
	}
	return s
}

// Addr locates one array sector in a striped array.
type Addr struct {
	Stripe    uint64 // stripe (row) number
	DataIndex int    // logical data index of the chunk within the stripe
	Role      int    // member holding the data
	Sector    uint64 // member sector (relative to data_offset)
	P, Q      int    // parity roles of the stripe; Q is -1 for raid4/5
}

// Locate maps array sector s (below ArraySectors) to its stripe, data
// index, member and member sector.
func (g *Striped) Locate(s uint64) Addr {
	off := s & (g.chunk - 1)
	chunkNo := s / g.chunk
	stripe := chunkNo / uint64(g.k)
	dd := int(chunkNo % uint64(g.k))
	pd, qd := g.parity(stripe)
	return Addr{
		Stripe:    stripe,
		DataIndex: dd,
		Role:      g.dataRole(dd, pd),
		Sector:    stripe*g.chunk + off,
		P:         pd,
		Q:         qd,
	}
}

// Map implements Geometry: the data block only.
func (g *Striped) Map(s uint64, dst []Loc) ([]Loc, uint64) {
	a := g.Locate(s)
	return append(dst[:0], Loc{Role: a.Role, Sector: a.Sector}), g.chunk - s&(g.chunk-1)
}

// Unmap implements Geometry; ok is false on P and Q blocks.
func (g *Striped) Unmap(role int, sector uint64) (uint64, bool) {
	if role < 0 || role >= g.n || sector >= g.devSectors {
		return 0, false
	}
	stripe := sector / g.chunk
	pd, qd := g.parity(stripe)
	if role == pd || role == qd {
		return 0, false
	}
	dd := g.dataIndex(role, pd)
	return (stripe*uint64(g.k)+uint64(dd))*g.chunk + sector&(g.chunk-1), true
}

// Row describes one stripe. The slices are filled by Striped.Row; they are
// re-used when their capacity suffices.
type Row struct {
	Stripe uint64
	Sector uint64 // first member sector of the stripe (Stripe × chunk)
	P, Q   int    // parity roles; Q is -1 for raid4/5
	// Data[dd] is the role holding logical data index dd; array sector
	// (Stripe*DataDisks()+dd)*chunk + o is at Sector+o of that role.
	Data []int
	// Slot[dd] is the raid6 Q coefficient exponent of Data[dd]:
	// Q = ⊕ g^Slot[dd]·D[dd] over GF(2^8). Empty for raid4/5.
	Slot []int
	// Syndrome lists roles in slot order, len SyndromeDisks(): the role
	// whose block is multiplied by g^i, or -1 where the syndrome takes a
	// zero block (the P and Q positions of DDF layouts). Empty for raid4/5.
	Syndrome []int
}

// NewRow allocates a Row with room for this geometry.
func (g *Striped) NewRow() *Row {
	r := &Row{Data: make([]int, g.k)}
	if g.level == RAID6 {
		r.Slot = make([]int, g.k)
		r.Syndrome = make([]int, g.SyndromeDisks())
	}
	return r
}

// Row fills r for stripe. It allocates only when r's slices are too small.
func (g *Striped) Row(stripe uint64, r *Row) {
	pd, qd := g.parity(stripe)
	r.Stripe = stripe
	r.Sector = stripe * g.chunk
	r.P, r.Q = pd, qd
	r.Data = resize(r.Data, g.k)
	for dd := range r.Data {
		r.Data[dd] = g.dataRole(dd, pd)
	}
	if g.level != RAID6 {
		r.Slot = r.Slot[:0]
		r.Syndrome = r.Syndrome[:0]
		return
	}
	r.Slot = resize(r.Slot, g.k)
	r.Syndrome = resize(r.Syndrome, g.SyndromeDisks())
	for i := range r.Syndrome {
		r.Syndrome[i] = -1
	}
	for dd, role := range r.Data {
		s := g.slot(role, pd, qd)
		r.Slot[dd] = s
		r.Syndrome[s] = role
	}
}

func resize(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}
