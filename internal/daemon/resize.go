package daemon

import "time"

// sizeLoop makes the exports follow the array's size when it changes
// while served (the end of a growing reshape, md's set_capacity): new
// NBD connections get the new size from the Backend at once (the NBD
// protocol has no way to tell a connected client; it sees the size it
// negotiated until it reconnects), the FUSE file is resized and its
// cached attributes invalidated. A kernel block device keeps its size:
// Linux 6.1's nbd takes NBD_ATTR_SIZE_BYTES only at connect (its
// reconfigure ignores it) and ublk on 6.1 and 6.12 has no command that
// changes a live device's size; it gets the new size at the next
// assembly.
func (s *Service) sizeLoop() {
	last := s.cfg.Array.Size()
	fuse, door := s.fuse, s.door // both set before the loop starts
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.tick:
			return
		case <-t.C:
		}
		n := s.cfg.Array.Size()
		if n == last {
			continue
		}
		s.cfg.Logf("array size changed from %d to %d bytes", last, n)
		if fuse != nil {
			fuse.Resize()
		}
		if door != nil {
			s.cfg.Logf("%s keeps %d bytes until the array is assembled again (no live resize of a %s device)", door.Path(), last, door.Kind())
		}
		last = n
	}
}
