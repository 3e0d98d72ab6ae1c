package daemon

import (
	"os"

	"mdtool/engine"
)

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
		rq.Backup = f
	}
	if err := s.cfg.Array.StartReshape(rq); err != nil {
		if f, ok := rq.Backup.(*os.File); ok {
			f.Close()
		}
		return engineError(err)
	}
	// the engine writes the file while a reshape that keeps or lowers
	// the data devices runs: it stays open (closed when collected)
	return nil
}
