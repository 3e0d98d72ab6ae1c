package daemon

import (
	"context"
	"time"

	"mdtool/engine"
	"mdtool/internal/nbdclient"
)

// remoteReAddLoop is the opt-in automatic --re-add of members on NBD
// servers (Config.RemoteReAdd): every interval, a faulty member whose
// server had gone away is tried again; once its server answers, the
// member is re-added exactly as "mdtool --re-add URI" does (with a bitmap,
// only the chunks written meanwhile are rebuilt).
func (s *Service) remoteReAddLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.tick:
			return
		case <-t.C:
		}
		for _, uri := range s.lostRemotes() {
			if !serverAnswers(uri, interval) {
				continue
			}
			if _, err := s.Manage(Request{Op: OpReAdd, Device: uri}); err != nil {
				s.cfg.Logf("md: automatic re-add of %s: %v", uri, err)
				continue
			}
			s.cfg.Logf("md: %s is back: re-added automatically", uri)
		}
	}
}

// lostRemotes lists the faulty members on NBD servers whose connection is
// lost.
func (s *Service) lostRemotes() []string {
	infos := s.cfg.Array.Members()
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	var out []string
	for _, mi := range infos {
		if mi.State != engine.Faulty || mi.Device < 0 || mi.Device >= len(s.cfg.Members) || s.removed[mi.Device] {
			continue
		}
		m := s.cfg.Members[mi.Device]
		if rs := remoteStatus(m.Dev); rs != nil && rs.State == "lost" {
			out = append(out, m.Path)
		}
	}
	return out
}

// serverAnswers reports whether the NBD server of uri completes a
// handshake within timeout.
func serverAnswers(uri string, timeout time.Duration) bool {
	u, err := nbdclient.ParseURI(uri)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := nbdclient.Dial(ctx, u, nbdclient.Options{})
	if err != nil {
		return false
	}
	c.Close()
	return true
}
