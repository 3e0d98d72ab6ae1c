//go:build mdtool_testhooks

package cmd

import (
	"fmt"
	"os"
	"strings"

	"mdtool/engine"
)

// growPauseFromEnv: MDTOOL_TEST_GROW_PAUSE=STEP (members, bitmap,
// resync; see engine.GrowHook) makes the test build's daemon say
// "GROW-PAUSE STEP" on stderr when a size change reaches STEP and stop
// there for good, so that a crash test can kill it at that point.
func growPauseFromEnv() {
	want := os.Getenv("MDTOOL_TEST_GROW_PAUSE")
	if want == "" {
		return
	}
	engine.GrowHook = func(step string) {
		if !strings.EqualFold(step, want) {
			return
		}
		fmt.Fprintf(os.Stderr, "GROW-PAUSE %s\n", step)
		select {}
	}
}
