//go:build mdtool_testhooks

package cmd

import (
	"fmt"
	"os"

	"mdtool/internal/testkit/faults"
	"mdtool/internal/testkit/geometry"
)

// The test build of mdtool (go build -tags mdtool_testhooks, as the cmd
// tests' mdtoolBinary builds it) takes fault injection (faults.Env,
// MDTOOL_TEST_FAULTS) and geometry overrides (geometry.Env,
// MDTOOL_GEOMETRY_OVERRIDE) from its environment. The product is built
// without this file and reads neither.
func init() {
	wrapMember = faults.FromEnv
	if err := geometry.FromEnv(); err != nil {
		fmt.Fprintf(os.Stderr, "mdtool: %v\n", err)
		os.Exit(2)
	}
}
