package daemon

import (
	"os"

	"mdtool/engine"
)

// startReshape hands the request to the engine. It returns the backup
// file when the reshape goes on writing it (one that keeps or lowers the
// data devices); the caller closes it when the reshape ends. A growth's
// file is done with once the reshape has started.
func (s *Service) startReshape(req Request) (*os.File, error) {
	rq := engine.ReshapeStart{RaidDisks: req.RaidDisks, ChunkSectors: req.ChunkSectors,
		StripeCache: req.StripeCache, SetArrayInfo: req.SetArrayInfo}
	if req.Layout != nil {
		rq.Layout, rq.SetLayout = *req.Layout, true
	}
	var f *os.File
	if req.BackupFile != "" {
		var err error
		if f, err = openReshapeBackup(req.BackupFile); err != nil {
			return nil, err
		}
		rq.Backup = f
	}
	if err := s.cfg.Array.StartReshape(rq); err != nil {
		if f != nil {
			f.Close()
		}
		return nil, engineError(err)
	}
	if f != nil && !s.cfg.Array.UsesReshapeBackup() {
		f.Close()
		f = nil
	}
	return f, nil
}
