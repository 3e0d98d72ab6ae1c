package cmd

import "mdtool/engine"

// probeCandidate090 is a 0.90 member for assemble: its superblock as the
// v1 view the selection and the engine work with (superblock.V1View:
// roles from the disk table, dev_number = this_disk.number), "minor" 90.
// What the kernel refuses (checksum, version, size) leaves it out as for
// 1.x.
func probeCandidate090(p *mdProbe) *asmDev {
	v := p.v0
	sb := v.sb.V1View(p.size)
	err := v.err
	if err == nil {
		err = v.sb.CheckDevice(p.size)
	}
	d := &asmDev{path: p.path, sb: sb, minor: engine.Minor090, sbOff: int64(v.offset),
		block: p.m.Geom.IsBlockDevice, rdev: p.m.Geom.Dev, events: sb.Events, refused: err}
	d.fillInfo()
	return d
}
