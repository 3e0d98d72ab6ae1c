package cmd

import "mdtool/engine"

// wrapMember, when not nil, wraps each member device assemble opens and
// each device the daemon opens for --add (daemon.Config.WrapDevice); its
// error stops that open and is printed as it is. It is nil in the
// product. In-process tests set it (fault injection from
// internal/testkit/faults); the test build of the binary (build tag
// mdtool_testhooks, testhooks_env.go) sets it from the environment.
var wrapMember func(path string, d engine.Device) (engine.Device, error)
