//go:build mdtool_testhooks

package cmd

import (
	"fmt"
	"os"
	"strings"

	"mdtool/engine"
)

// MDTOOL_TEST_GROW_SIZE_PAUSE=STEP (members, bitmap, resync; see
// engine.GrowSizeHook) makes the test build's daemon say "GROW-PAUSE
// STEP" on stderr when a size change reaches STEP and stop there for
// good, so that a crash test can kill it at that point.
func init() {
	want := os.Getenv("MDTOOL_TEST_GROW_SIZE_PAUSE")
	if want == "" {
		return
	}
	engine.GrowSizeHook = func(step string) {
		if !strings.EqualFold(step, want) {
			return
		}
		fmt.Fprintf(os.Stderr, "GROW-PAUSE %s\n", step)
		select {}
	}
}
