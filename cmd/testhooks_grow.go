//go:build mdtool_testhooks

package cmd

import (
	"os"
	"strings"
	"time"

	"mdtool/engine"
)

// The test build stops the daemon at named points of a bitmap change
// (engine.SetGrowPause): MDTOOL_TEST_GROW_PAUSE lists them, comma
// separated ("add-area", "add-loaded", "remove-dropped", "super-written").
// At each, the daemon writes the point's name to the file
// MDTOOL_TEST_GROW_PAUSE_FILE and waits until the file FILE.resume.POINT
// exists (it removes it and goes on), or for ever, for the test to kill it.
func init() {
	points := os.Getenv("MDTOOL_TEST_GROW_PAUSE")
	if points == "" {
		return
	}
	marker := os.Getenv("MDTOOL_TEST_GROW_PAUSE_FILE")
	want := map[string]bool{}
	for _, p := range strings.Split(points, ",") {
		want[p] = true
	}
	engine.SetGrowPause(func(p string) {
		if !want[p] || marker == "" {
			return
		}
		if os.WriteFile(marker+".tmp", []byte(p), 0o644) == nil {
			os.Rename(marker+".tmp", marker)
		}
		resume := marker + ".resume." + p
		for {
			if os.Remove(resume) == nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
