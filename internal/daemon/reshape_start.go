package daemon

import "mdtool/engine"

// startReshape hands the request to the engine.
func (s *Service) startReshape(req Request) error {
	rq := engine.ReshapeStart{RaidDisks: req.RaidDisks, ChunkSectors: req.ChunkSectors}
	if req.Layout != nil {
		rq.Layout, rq.SetLayout = *req.Layout, true
	}
	if req.BackupFile != "" {
		f, err := openReshapeBackup(req.BackupFile)
		if err != nil {
			return err
		}
		defer f.Close()
		rq.Backup = f
	}
	if err := s.cfg.Array.StartReshape(rq); err != nil {
		return engineError(err)
	}
	return nil
}
