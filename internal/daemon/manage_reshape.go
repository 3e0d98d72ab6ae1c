package daemon

import "mdtool/engine"

// reshape starts growing the array to n devices onto its spares
// (engine.StartReshape); the engine's sync thread then moves the data.
func (s *Service) reshape(n int) error {
	if s.cfg.ReadOnly {
		return Errorf(CodeReadOnly, "the array is read-only")
	}
	if n <= 0 {
		return Errorf(CodeInvalid, "reshape needs a number of devices")
	}
	if err := s.cfg.Array.StartReshape(engine.ReshapeStart{RaidDisks: n}); err != nil {
		return engineError(err)
	}
	s.cfg.Logf("reshape to %d devices started", n)
	return nil
}
