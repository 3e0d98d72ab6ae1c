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
// first window at or beyond the fraction F of the new array, counted from
// the end when the reshape runs backwards), "backup:F" (after the backup
// file took the first window reaching F, before its stripes are written;
// RECORDED is then the window's start), "checkpoint"
// (before the superblocks record the reshape's first position, i.e. while
// they still hold its start: 0, or the end for a reshape that runs
// backwards) or "finish" (before the superblocks of the finished
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
	first, seen := true, false
	// start: the position the superblocks held at the first call; dir:
	// 1 forwards, -1 backwards, 0 not known yet (a resumed reshape: known
	// from its second window on); last: the last window's position.
	var start, last uint64
	dir := 0
	engine.ReshapeHook = func(p string, pos, recorded, total uint64) {
		if !seen {
			seen = true
			start = recorded
			switch start {
			case 0: // a fresh forwards reshape
				dir = 1
			case total: // a fresh backwards one (md starts at the end)
				dir = -1
			}
		}
		if first && p == "move" {
			first = false
			last = pos
			fmt.Fprintf(os.Stderr, "RESHAPE-RESUME %d %d\n", pos, recorded)
		} else if p == "move" && dir == 0 && pos != last {
			dir = 1
			if pos < last {
				dir = -1
			}
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
		done := pos
		if dir < 0 {
			done = total - pos
		}
		switch {
		case (p == "move" || p == "backup") && (dir == 0 || float64(done) < frac*float64(total)):
			return
		case p == "checkpoint" && (recorded != start || start != 0 && start != total):
			// only the first checkpoint of a fresh reshape
			return
		}
		fmt.Fprintf(os.Stderr, "RESHAPE-PAUSE %s %d %d\n", p, pos, recorded)
		select {}
	}
}
