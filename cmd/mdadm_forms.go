package cmd

import (
	"strconv"
	"strings"
	"time"
)

// longModePrefix returns the mode option that name (a long option without
// its dashes) abbreviates, as getopt_long resolves an unambiguous prefix
// (--zero and --zero-super are --zero-superblock for mdadm); name itself
// when it is an option's full name, abbreviates no mode option or is
// ambiguous.
func (t *argTable) longModePrefix(name string) string {
	if name == "" {
		return name
	}
	if _, ok := longModes["--"+name]; ok {
		return name
	}
	if _, ok := t.any.long[name]; ok {
		return name
	}
	cands := map[string]bool{}
	for m := range longModes {
		if strings.HasPrefix(m[2:], name) {
			cands[m[2:]] = true
		}
	}
	if len(cands) != 1 {
		return name
	}
	for n := range t.any.long {
		if strings.HasPrefix(n, name) && !cands[n] {
			return name
		}
	}
	for _, n := range []string{"misc", "action", "version"} {
		if strings.HasPrefix(n, name) {
			return name
		}
	}
	for m := range cands {
		return m
	}
	return name
}

// stopTimeout bounds how long stop waits for a daemon to finish.
const stopTimeout = 5 * time.Minute

// parseDelay parses --delay as mdadm's parse_num does (a whole decimal
// int, at least 1); "" is 0 (not given).
func parseDelay(s string) (uint32, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 {
		return 0, exitf(ExitUsage, "invalid delay: %s", s)
	}
	return uint32(n), nil
}

// roModes: mdadm's -o/--readonly and -w/--readwrite as the first option
// (misc mode) are the readonly and readwrite commands.
var roModes = map[string]string{
	"-o": "readonly", "--readonly": "readonly", "-w": "readwrite", "--readwrite": "readwrite",
}
