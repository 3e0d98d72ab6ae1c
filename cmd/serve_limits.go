package cmd

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"

	"mdtool/internal/mdadm/plan"
	"mdtool/internal/nbdclient"
	"mdtool/internal/serve/nbd"
)

// addNBDLimitFlags adds the NBD resource limits (configurable); create has
// them too and passes them to the daemon it starts.
func addNBDLimitFlags(f *pflag.FlagSet, s *serveOptions) {
	f.IntVar(&s.nbdMaxClients, "nbd-max-clients", nbd.DefaultMaxConns, "NBD connections served at once (unix socket and TCP together); more are closed at once")
	f.StringVar(&s.nbdMaxMemory, "nbd-max-memory", "256M", "request data (read replies, write payloads) in flight over all NBD connections; requests wait beyond it")
	f.DurationVar(&s.nbdIdleTimeout, "nbd-idle-timeout", nbd.DefaultIdleTimeout, "drop an NBD connection that neither sends requests nor takes its replies for this long (0: never, e.g. for a kernel nbd device)")
	f.DurationVar(&s.remoteTimeout, "remote-timeout", nbdclient.DefaultTimeout, "the longest a request may stall because a member on an NBD server (nbd://, nbds://, nbd+unix://) stopped answering: the member is failed when it leaves a request unanswered for this long less an allowance (a quarter of it, at most 2s) for probing a silent server and recording the failure (a flush: that long after the server's last reply, at most twice that long; a silent server is probed every quarter of that, at most 0.5s)")
	f.DurationVar(&s.remoteReAdd, "remote-readd", 0, "re-add a failed member on an NBD server automatically once its server answers again, trying this often (0: never; --re-add by hand)")
	markConfigurable(f, "nbd-max-clients", "nbd-max-memory", "nbd-idle-timeout", "remote-timeout", "remote-readd")
}

// nbdLimits checks the NBD limit flags: the connection count, the memory
// budget in bytes and the idle timeout (negative: never).
func (s *serveOptions) nbdLimits() (int, int64, time.Duration, error) {
	if s.nbdMaxClients < 1 {
		return 0, 0, 0, usagef("--nbd-max-clients must be at least 1")
	}
	kib, err := plan.ParseSize(s.nbdMaxMemory)
	if err != nil || kib < 1024 {
		return 0, 0, 0, usagef("bad --nbd-max-memory %q: a size of at least 1M (K, M, G suffixes)", s.nbdMaxMemory)
	}
	if s.remoteTimeout <= 0 {
		return 0, 0, 0, usagef("--remote-timeout must be positive")
	}
	if s.remoteReAdd < 0 {
		return 0, 0, 0, usagef("--remote-readd must not be negative")
	}
	idle := s.nbdIdleTimeout
	switch {
	case idle < 0:
		return 0, 0, 0, usagef("--nbd-idle-timeout must not be negative")
	case idle == 0:
		idle = -1
	}
	return s.nbdMaxClients, int64(kib) << 10, idle, nil
}

// checkTLSFlags refuses TLS flags that would serve without the protection
// they ask for.
func (s *serveOptions) checkTLSFlags() error {
	switch {
	case s.tlsCert != "" && s.tlsKey == "":
		return usagef("--tls-cert needs --tls-key")
	case s.tlsKey != "" && s.tlsCert == "":
		return usagef("--tls-key needs --tls-cert")
	case s.tlsCA != "" && s.tlsCert == "":
		return usagef("--tls-ca needs --tls-cert and --tls-key (client certificates are only checked over TLS)")
	case s.tlsCert != "" && s.nbdListen == "":
		return usagef("--tls-cert and --tls-key need --nbd-listen")
	}
	return nil
}

// plaintextWarning is the warning for NBD without TLS on a TCP address
// that is not loopback ("" if none is due).
func (s *serveOptions) plaintextWarning() string {
	if s.nbdListen == "" || s.tlsCert != "" {
		return ""
	}
	host, _, err := net.SplitHostPort(s.nbdListen)
	if err != nil {
		return ""
	}
	if host == "localhost" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("warning: NBD on %s is served without TLS: anyone who reaches it can read and write the array (use --tls-cert, --tls-key and --tls-ca, or a loopback address)", s.nbdListen)
}

// nbdLimitArgs returns the NBD limit flags whose values differ from the
// defaults (given, or from the environment or the configuration file), for
// the assemble that create starts.
func nbdLimitArgs(f *pflag.FlagSet) []string {
	var args []string
	for _, n := range []string{"nbd-max-clients", "nbd-max-memory", "nbd-idle-timeout", "remote-timeout", "remote-readd"} {
		if fl := f.Lookup(n); fl != nil && fl.Value.String() != fl.DefValue {
			args = append(args, "--"+n+"="+fl.Value.String())
		}
	}
	return args
}
