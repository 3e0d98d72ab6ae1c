package fuseexport

// Resize makes the file follow the Backend's size after it changed (an
// array that grew by a reshape or a size change): requests are bounded
// by the new size at once, and the kernel's cached attributes of the
// file are invalidated so that stat and the page cache see it (md's
// set_capacity + revalidate). It returns the new size.
func (s *Server) Resize() int64 {
	n := s.fs.b.Size()
	if s.fs.size.Swap(n) != n {
		s.srv.InodeNotify(fileID, -1, 0) // attributes only: the data stays
	}
	return n
}
