package plan

import (
	"fmt"
	"strconv"
	"strings"

	"mdtool/superblock"
)

// The levels and layout values are the format's (package superblock);
// these names refer to them for the mdadm rules written in their terms.
const (
	LevelLinear    = superblock.LevelLinear
	LevelRAID0     = superblock.LevelRAID0
	LevelRAID1     = superblock.LevelRAID1
	LevelRAID4     = superblock.LevelRAID4
	LevelRAID5     = superblock.LevelRAID5
	LevelRAID6     = superblock.LevelRAID6
	LevelRAID10    = superblock.LevelRAID10
	LevelMultipath = superblock.LevelMultipath
	LevelFaulty    = superblock.LevelFaulty
	// LevelContainer is mdadm's LEVEL_CONTAINER (external metadata); it
	// is never stored in an md superblock.
	LevelContainer = -100
)

// raid4/5/6 layout values (mdadm's ALGORITHM_*) and raid0 layouts.
const (
	LayoutLeftAsymmetric   = superblock.LayoutLeftAsymmetric
	LayoutRightAsymmetric  = superblock.LayoutRightAsymmetric
	LayoutLeftSymmetric    = superblock.LayoutLeftSymmetric
	LayoutRightSymmetric   = superblock.LayoutRightSymmetric
	LayoutParityFirst      = superblock.LayoutParityFirst
	LayoutParityLast       = superblock.LayoutParityLast
	LayoutDDFZeroRestart   = superblock.LayoutDDFZeroRestart
	LayoutDDFNRestart      = superblock.LayoutDDFNRestart
	LayoutDDFNContinue     = superblock.LayoutDDFNContinue
	LayoutLeftAsymmetric6  = superblock.LayoutLeftAsymmetric6
	LayoutRightAsymmetric6 = superblock.LayoutRightAsymmetric6
	LayoutLeftSymmetric6   = superblock.LayoutLeftSymmetric6
	LayoutRightSymmetric6  = superblock.LayoutRightSymmetric6
	LayoutParityFirst6     = superblock.LayoutParityFirst6

	RAID0LayoutDangerous = superblock.LayoutRAID0Dangerous
	RAID0LayoutOriginal  = superblock.LayoutRAID0Original
	RAID0LayoutAlternate = superblock.LayoutRAID0Alternate
)

// DefaultChunkKiB is mdadm's DEFAULT_CHUNK.
const DefaultChunkKiB = 512

// Mapping is one row of an mdadm name table (maps.c mapping_t).
type Mapping struct {
	Name string
	Num  int
}

type mapping = Mapping

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

// mdadm's tables: pers[] (level names), r5layout[], r6layout[] and
// r0layout[], for the callers that print or read with map_num/map_name.
var (
	PersTable     = levelNames
	R5LayoutTable = r5Layouts
	R6LayoutTable = r6Layouts
	R0LayoutTable = r0Layouts
)

func byName(m []mapping, s string) (int, bool) {
	for _, e := range m {
		if e.Name == s { // mdadm's map_name: case-sensitive
			return e.Num, true
		}
	}
	return 0, false
}

func byNum(m []mapping, n int) (string, bool) {
	for _, e := range m {
		if e.Num == n {
			return e.Name, true
		}
	}
	return "", false
}

// MapNum is mdadm's map_num: the first name of t for n (the one mdadm
// prints), or false.
func MapNum(t []Mapping, n int) (string, bool) { return byNum(t, n) }

// MapName is mdadm's map_name: the number of t for a name, matched
// case-sensitively, or false.
func MapName(t []Mapping, name string) (int, bool) { return byName(t, name) }

// MapNameFold is MapName with the name matched case-insensitively (how
// mdtool reads mdadm.conf's level= words).
func MapNameFold(t []Mapping, name string) (int, bool) {
	for _, e := range t {
		if strings.EqualFold(e.Name, name) {
			return e.Num, true
		}
	}
	return 0, false
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
	return superblock.RAID10Near(layout), superblock.RAID10Far(layout), superblock.RAID10Offset(layout)
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
		out = append(out, e.Name)
	}
	return out
}
