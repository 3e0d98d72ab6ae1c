package engine

import "errors"

// sizer is a device whose size can change while it is served (a file
// truncated, a block device resized).
type sizer interface {
	CurrentSize() (int64, error)
}

// pastEnd says whether err, an I/O error of m, means that m no longer
// holds its data area: I/O at or past its current end, or a size that
// shrank below data_offset + data_size. Such an error is not a media
// error that rewriting the block repairs (the rewrite would only extend
// a truncated file again): the member fails, as md fails a member whose
// I/O fails beyond its end.
func (a *Array) pastEnd(m *member, err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrBeyondEnd) {
		return true
	}
	d := m.dev
	for {
		switch x := d.(type) {
		case sizer:
			size, serr := x.CurrentSize()
			return serr == nil && size < a.dataEnd(m)
		case *FaultDevice:
			d = x.Device
			continue
		case *CountingDevice:
			d = x.Device
			continue
		}
		return false
	}
}

// dataEnd is the byte offset on m where its data area ends.
func (a *Array) dataEnd(m *member) int64 {
	end := m.dataOff
	if m.role >= 0 {
		end += int64(a.geo.DevSectors(m.role)) * 512
	}
	return end
}

// ioFailed handles a member I/O error that means the device is gone
// (pastEnd): on a redundant array the member fails at once (md_error),
// so that nothing is written to it again and the request is served from
// the others. It reports whether m is faulty now.
func (a *Array) ioFailed(m *member, err error) bool {
	if !a.pastEnd(m, err) {
		return m.State() == Faulty
	}
	if a.redundant() && m.State() != Faulty {
		a.failMember(m, err)
	}
	return m.State() == Faulty
}
