//go:build mdtool_testhooks

package cmd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"mdtool/engine"
)

// The test build stops a reshape at a point for the kill -9 tests
// (engine.ReshapeHook): MDTOOL_TEST_RESHAPE_PAUSE is "move:F" (before the
// first window at or beyond the fraction F of the new array), "checkpoint"
// (before the superblocks record the reshape's first position, i.e. while
// they still hold 0) or "finish" (before the superblocks of the finished
// reshape are written). There the daemon says "RESHAPE-PAUSE POINT POS
// RECORDED" on stderr and waits for good. MDTOOL_TEST_RESHAPE_GATE=FILE
// holds the reshape before its first window until FILE exists. Before its
// first window the daemon says "RESHAPE-RESUME POS RECORDED" (where the
// reshape starts and what the superblocks hold).
func init() {
	spec := os.Getenv("MDTOOL_TEST_RESHAPE_PAUSE")
	gate := os.Getenv("MDTOOL_TEST_RESHAPE_GATE")
	if spec == "" && gate == "" {
		return
	}
	point, arg, _ := strings.Cut(spec, ":")
	frac, _ := strconv.ParseFloat(arg, 64)
	first := true
	engine.ReshapeHook = func(p string, pos, recorded, total uint64) {
		if first && p == "move" {
			first = false
			fmt.Fprintf(os.Stderr, "RESHAPE-RESUME %d %d\n", pos, recorded)
		}
		if gate != "" && p == "move" {
			for {
				if _, err := os.Stat(gate); err == nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			gate = ""
		}
		if p != point {
			return
		}
		switch {
		case p == "move" && float64(pos) < frac*float64(total):
			return
		case p == "checkpoint" && recorded != 0:
			return
		}
		fmt.Fprintf(os.Stderr, "RESHAPE-PAUSE %s %d %d\n", p, pos, recorded)
		select {}
	}
}
