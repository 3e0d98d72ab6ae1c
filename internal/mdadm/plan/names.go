package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// RAID levels as stored in the superblock's level field.
const (
	LevelLinear    = -1
	LevelRAID0     = 0
	LevelRAID1     = 1
	LevelRAID4     = 4
	LevelRAID5     = 5
	LevelRAID6     = 6
	LevelRAID10    = 10
	LevelMultipath = -4
	LevelFaulty    = -5
	LevelContainer = -100
)

// raid4/5/6 layout values (mdadm's ALGORITHM_*).
const (
	LayoutLeftAsymmetric   = 0
	LayoutRightAsymmetric  = 1
	LayoutLeftSymmetric    = 2
	LayoutRightSymmetric   = 3
	LayoutParityFirst      = 4
	LayoutParityLast       = 5
	LayoutDDFZeroRestart   = 8
	LayoutDDFNRestart      = 9
	LayoutDDFNContinue     = 10
	LayoutLeftAsymmetric6  = 16
	LayoutRightAsymmetric6 = 17
	LayoutLeftSymmetric6   = 18
	LayoutRightSymmetric6  = 19
	LayoutParityFirst6     = 20
)

// raid0 layout values.
const (
	RAID0LayoutDangerous = 0 // unspecified
	RAID0LayoutOriginal  = 1 // pre-3.14 kernels
	RAID0LayoutAlternate = 2 // 3.14+ kernels
)

// DefaultChunkKiB is mdadm's DEFAULT_CHUNK.
const DefaultChunkKiB = 512

type mapping struct {
	name string
	num  int
}

// Tables in mdadm's order: the first entry with a value is the name mdadm
// prints for it.
var levelNames = []mapping{
	{"linear", LevelLinear},
	{"raid0", 0}, {"0", 0}, {"stripe", 0},
	{"raid1", 1}, {"1", 1}, {"mirror", 1},
	{"raid4", 4}, {"4", 4},
	{"raid5", 5}, {"5", 5},
	{"multipath", LevelMultipath}, {"mp", LevelMultipath},
	{"raid6", 6}, {"6", 6},
	{"raid10", 10}, {"10", 10},
	{"faulty", LevelFaulty},
	{"container", LevelContainer},
}

var r5Layouts = []mapping{
	{"left-asymmetric", LayoutLeftAsymmetric},
	{"right-asymmetric", LayoutRightAsymmetric},
	{"left-symmetric", LayoutLeftSymmetric},
	{"right-symmetric", LayoutRightSymmetric},
	{"default", LayoutLeftSymmetric},
	{"la", LayoutLeftAsymmetric},
	{"ra", LayoutRightAsymmetric},
	{"ls", LayoutLeftSymmetric},
	{"rs", LayoutRightSymmetric},
	{"parity-first", LayoutParityFirst},
	{"parity-last", LayoutParityLast},
	// raid5 has no DDF layouts: mdadm maps the names onto equivalents.
	{"ddf-zero-restart", LayoutRightAsymmetric},
	{"ddf-N-restart", LayoutLeftAsymmetric},
	{"ddf-N-continue", LayoutLeftSymmetric},
}

var r6Layouts = []mapping{
	{"left-asymmetric", LayoutLeftAsymmetric},
	{"right-asymmetric", LayoutRightAsymmetric},
	{"left-symmetric", LayoutLeftSymmetric},
	{"right-symmetric", LayoutRightSymmetric},
	{"default", LayoutLeftSymmetric},
	{"la", LayoutLeftAsymmetric},
	{"ra", LayoutRightAsymmetric},
	{"ls", LayoutLeftSymmetric},
	{"rs", LayoutRightSymmetric},
	{"parity-first", LayoutParityFirst},
	{"parity-last", LayoutParityLast},
	{"ddf-zero-restart", LayoutDDFZeroRestart},
	{"ddf-N-restart", LayoutDDFNRestart},
	{"ddf-N-continue", LayoutDDFNContinue},
	{"left-asymmetric-6", LayoutLeftAsymmetric6},
	{"right-asymmetric-6", LayoutRightAsymmetric6},
	{"left-symmetric-6", LayoutLeftSymmetric6},
	{"right-symmetric-6", LayoutRightSymmetric6},
	{"parity-first-6", LayoutParityFirst6},
}

var r0Layouts = []mapping{
	{"original", RAID0LayoutOriginal},
	{"alternate", RAID0LayoutAlternate},
	{"1", 1},
	{"2", 2},
	{"dangerous", 0},
}

func byName(m []mapping, s string) (int, bool) {
	for _, e := range m {
		if e.name == s { // mdadm's map_name: case-sensitive
			return e.num, true
		}
	}
	return 0, false
}

func byNum(m []mapping, n int) (string, bool) {
	for _, e := range m {
		if e.num == n {
			return e.name, true
		}
	}
	return "", false
}

// ParseLevel maps a --level argument to a level number, accepting every
// name mdadm accepts (linear, raid0/0/stripe, raid1/1/mirror, raid4/4,
// raid5/5, raid6/6, raid10/10, multipath/mp, faulty, container). Names are
// case-sensitive, as in mdadm.
func ParseLevel(s string) (int, error) {
	if n, ok := byName(levelNames, s); ok {
		return n, nil
	}
	return 0, refuseArg(InvalidLevel, s)
}

// LevelName is the name mdadm prints for a level ("raid5", "linear", ...);
// ok is false for a value mdadm has no name for (it prints "-unknown-").
func LevelName(level int) (name string, ok bool) {
	return byNum(levelNames, level)
}

// ParseLayout maps a --layout argument for the given level to the stored
// layout value, with mdadm's names and error texts: raid5/raid6 algorithm
// names (incl. la/ra/ls/rs, parity-first/last, ddf-*, and *-6 for raid6),
// raid10 nN/fN/oN, raid0 original/alternate/1/2/dangerous.
func ParseLayout(level int, s string) (uint32, error) {
	switch level {
	case LevelRAID0:
		if n, ok := byName(r0Layouts, s); ok {
			return uint32(n), nil
		}
		return 0, &Refusal{Kind: LayoutNotUnderstood, Arg: s, Level: "raid0"}
	case LevelRAID5:
		if n, ok := byName(r5Layouts, s); ok {
			return uint32(n), nil
		}
		return 0, &Refusal{Kind: LayoutNotUnderstood, Arg: s, Level: "raid5"}
	case LevelRAID6:
		if n, ok := byName(r6Layouts, s); ok {
			return uint32(n), nil
		}
		return 0, &Refusal{Kind: LayoutNotUnderstood, Arg: s, Level: "raid6"}
	case LevelRAID10:
		if n, ok := parseLayout10(s); ok {
			return n, nil
		}
		return 0, refuseArg(LayoutRAID10Invalid, s)
	}
	name, ok := LevelName(level)
	if !ok {
		name = "(null)"
	}
	return 0, &Refusal{Kind: LayoutNotMeaningful, Level: name}
}

// parseLayout10 mirrors mdadm's parse_layout_10: 'n', 'f' or 'o' followed
// by a decimal copy count 1..200.
func parseLayout10(s string) (uint32, bool) {
	if len(s) < 2 || (s[0] != 'n' && s[0] != 'f' && s[0] != 'o') {
		return 0, false
	}
	// strtoul: leading white space and a '+' sign are accepted.
	digits := strings.TrimLeft(s[1:], " \t\n\v\f\r")
	digits = strings.TrimPrefix(digits, "+")
	if digits == "" {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	copies, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || copies < 1 || copies > 200 {
		return 0, false
	}
	switch s[0] {
	case 'n':
		return 0x100 + uint32(copies), true
	case 'o':
		return 0x10000 + uint32(copies)<<8 + 1, true
	}
	return uint32(copies)<<8 + 1, true
}

// DefaultLayout is mdadm's default layout for a level (default_layout in
// Create.c): raid0 original (1), raid5/6 left-symmetric (2), raid10 n2
// (0x102), 0 otherwise.
func DefaultLayout(level int) uint32 {
	switch level {
	case LevelRAID0:
		return RAID0LayoutOriginal
	case LevelRAID10:
		return 0x102
	case LevelRAID5, LevelRAID6:
		return LayoutLeftSymmetric
	}
	return 0
}

// RAID10Copies returns near and far copy counts and the offset flag of a
// raid10 layout.
func RAID10Copies(layout uint32) (near, far int, offset bool) {
	return int(layout & 255), int(layout >> 8 & 255), layout&0x10000 != 0
}

// LayoutName is the text mdadm prints after "Layout :" in --examine and
// --detail for a level and layout value:
//
//   - raid5/raid6: the algorithm name ("left-symmetric", "parity-first-6",
//     "ddf-N-restart", ...), "-unknown-" if it has none;
//   - raid0: "original", "alternate", "dangerous" or "-unknown-" (mdadm
//     prints the line only when the layout is meaningful);
//   - raid10: "near=2", "far=2", "offset=2", "near=2, far=3" (mdadm prints
//     this after one space), or "NO REDUNDANCY" (printed with no space);
//   - other levels: "" (no Layout line).
func LayoutName(level int, layout uint32) string {
	var m []mapping
	switch level {
	case LevelRAID0:
		m = r0Layouts
	case LevelRAID5:
		m = r5Layouts
	case LevelRAID6:
		m = r6Layouts
	case LevelRAID10:
		return raid10LayoutName(layout)
	default:
		return ""
	}
	if int32(layout) < 0 {
		return "-unknown-"
	}
	if s, ok := byNum(m, int(layout)); ok {
		return s
	}
	return "-unknown-"
}

func raid10LayoutName(layout uint32) string {
	near, far, offset := RAID10Copies(layout)
	var parts []string
	if near != 1 {
		parts = append(parts, fmt.Sprintf("near=%d", near))
	}
	if far != 1 {
		kind := "far"
		if offset {
			kind = "offset"
		}
		parts = append(parts, fmt.Sprintf("%s=%d", kind, far))
	}
	if near*far == 1 {
		parts = append(parts, "NO REDUNDANCY")
	}
	return strings.Join(parts, ", ")
}

// LayoutNames lists the --layout names accepted for a level, in mdadm's
// table order (for completions and help); nil for levels without layouts.
func LayoutNames(level int) []string {
	var m []mapping
	switch level {
	case LevelRAID0:
		m = r0Layouts
	case LevelRAID5:
		m = r5Layouts
	case LevelRAID6:
		m = r6Layouts
	case LevelRAID10:
		return []string{"n2", "n3", "f2", "f3", "o2", "o3"}
	default:
		return nil
	}
	out := make([]string, 0, len(m))
	for _, e := range m {
		out = append(out, e.name)
	}
	return out
}
