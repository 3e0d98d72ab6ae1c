package cmd

// Text helpers shared by the commands that print what mdadm 4.2 prints
// (examine, examine-bitmap, detail, ...). Each helper reproduces one
// formatting rule of mdadm exactly, including its quirks; the comment says
// which one.

import (
	"fmt"
	"mdtool/internal/mdadm/plan"
	"mdtool/superblock"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// humanSize is mdadm's human_size(bytes): "" below 5000 KiB, else
// " (X.XX MiB Y.YY MB)", switching to GiB/GB at 2 GiB and TiB/TB at 2 TiB,
// each figure rounded to the nearest hundredth. Note the leading space.
// The arithmetic is mdadm's signed 64-bit arithmetic, including its
// wrap-around for absurd sizes (above 2^63/200 bytes).
func humanSize(bytes int64) string {
	switch {
	case bytes < 5000*1024:
		return ""
	case bytes < 2<<30:
		cMiB := (bytes*200/(1<<20) + 1) / 2
		cMB := (bytes/(1000000/200) + 1) / 2
		return fmt.Sprintf(" (%d.%02d MiB %d.%02d MB)", cMiB/100, cMiB%100, cMB/100, cMB%100)
	case bytes < 2<<40:
		cGiB := (bytes*200/(1<<30) + 1) / 2
		cGB := (bytes/(1000000000/200) + 1) / 2
		return fmt.Sprintf(" (%d.%02d GiB %d.%02d GB)", cGiB/100, cGiB%100, cGB/100, cGB%100)
	default:
		cTiB := (bytes*200/(1<<40) + 1) / 2
		cTB := (bytes/(1000000000000/200) + 1) / 2
		return fmt.Sprintf(" (%d.%02d TiB %d.%02d TB)", cTiB/100, cTiB%100, cTB/100, cTB%100)
	}
}

// Unit prefixes for humanSizeBrief (mdadm's IEC and JEDEC).
const (
	prefixIEC   = 1 // MiB, GiB, TiB
	prefixJEDEC = 2 // MB, GB, TB
)

// humanSizeBrief is mdadm's human_size_brief(bytes, prefix): "" below
// 5000 KiB, else "X.XXMiB" (prefixIEC) or "X.XXMB" (prefixJEDEC), switching
// unit at 2 GiB and 2 TiB like humanSize. No space, no parentheses. Any
// other prefix gives "".
func humanSizeBrief(bytes int64, prefix int) string {
	if bytes < 5000*1024 {
		return ""
	}
	switch prefix {
	case prefixIEC:
		switch {
		case bytes < 2<<30:
			c := (bytes*200/(1<<20) + 1) / 2
			return fmt.Sprintf("%d.%02dMiB", c/100, c%100)
		case bytes < 2<<40:
			c := (bytes*200/(1<<30) + 1) / 2
			return fmt.Sprintf("%d.%02dGiB", c/100, c%100)
		default:
			c := (bytes*200/(1<<40) + 1) / 2
			return fmt.Sprintf("%d.%02dTiB", c/100, c%100)
		}
	case prefixJEDEC:
		switch {
		case bytes < 2<<30:
			c := (bytes/(1000000/200) + 1) / 2
			return fmt.Sprintf("%d.%02dMB", c/100, c%100)
		case bytes < 2<<40:
			c := (bytes/(1000000000/200) + 1) / 2
			return fmt.Sprintf("%d.%02dGB", c/100, c%100)
		default:
			c := (bytes/(1000000000000/200) + 1) / 2
			return fmt.Sprintf("%d.%02dTB", c/100, c%100)
		}
	}
	return ""
}

// humanChunksize is mdadm's human_chunksize (bitmap.c, -X "Chunksize"):
// the byte count shifted down by 10 while it is at least 1024, with the
// binary units labelled "B", "KB", "MB", "GB", "TB" ("64 MB" is 64 MiB).
// Remainders are dropped: 1536 bytes is "1 KB".
func humanChunksize(bytes uint64) string {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB", "EB"}
	i := 0
	for bytes>>10 != 0 {
		bytes >>= 10
		i++
	}
	return fmt.Sprintf("%d %s", bytes, units[i])
}

// ctime24 is what mdadm prints with printf("%.24s", ctime(&t)): the local
// time as "Www Mmm dd hh:mm:ss yyyy" (day of month space-padded), cut to
// 24 characters. Like glibc's asctime, years beyond 9999 print in full and
// are then cut by the 24-character limit.
func ctime24(sec int64) string {
	t := time.Unix(sec, 0).In(time.Local)
	s := fmt.Sprintf("%.3s %.3s%3d %02d:%02d:%02d %d",
		t.Weekday().String(), t.Month().String(), t.Day(),
		t.Hour(), t.Minute(), t.Second(), t.Year())
	if len(s) > 24 {
		s = s[:24]
	}
	return s
}

// timeRFC3339 formats seconds since the epoch as RFC 3339 in UTC, for the
// JSON outputs.
func timeRFC3339(sec int64) string {
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}

// uuidText prints 16 UUID bytes in stored order as four groups of 8 hex
// digits joined by sep: how mdadm prints every v1.x UUID ("Array UUID",
// "Device UUID", -X "UUID", ARRAY lines), and fname_from_uuid's text after
// "UUID-" for v1.x.
func uuidText(u [16]byte, sep byte) string {
	var b strings.Builder
	for i, c := range u {
		if i > 0 && i%4 == 0 {
			b.WriteByte(sep)
		}
		fmt.Fprintf(&b, "%02x", c)
	}
	return b.String()
}

// uuidWordsText prints four 32-bit words as "%08x:%08x:%08x:%08x": how
// mdadm prints a 0.90 UUID (set_uuid0..3) and a bitmap UUID read as
// host-endian words.
func uuidWordsText(w [4]uint32, sep byte) string {
	return fmt.Sprintf("%08x%c%08x%c%08x%c%08x", w[0], sep, w[1], sep, w[2], sep, w[3])
}

// fnameFromUUID is mdadm's fname_from_uuid for v1.x metadata:
// "UUID-" followed by uuidText with the given separator.
func fnameFromUUID(u [16]byte, sep byte) string { return "UUID-" + uuidText(u, sep) }

// rfc4122UUID prints 16 bytes in the dashed 8-4-4-4-12 form libblkid and
// udev use (ID_FS_UUID).
func rfc4122UUID(u [16]byte) string {
	h := fmt.Sprintf("%x", u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// mapping is one row of an mdadm name table; the tables are mdadm's
// (internal/mdadm/plan): pers[], r5layout[], r6layout[].
type mapping = plan.Mapping

var (
	persTable     = plan.PersTable
	r5LayoutTable = plan.R5LayoutTable
	r6LayoutTable = plan.R6LayoutTable
)

// mapNum is mdadm's map_num: the first name for num, or "" and false.
func mapNum(t []mapping, num int) (string, bool) { return plan.MapNum(t, num) }

// unknownName is what mdadm prints where map_num finds nothing
// ("c ? c : \"-unknown-\"").
const unknownName = "-unknown-"

// levelName returns the level as mdadm prints it ("raid5", "linear", ...)
// or "-unknown-".
func levelName(level int) string {
	if n, ok := mapNum(persTable, level); ok {
		return n
	}
	return unknownName
}

// levelNameOrNull is levelName for the places where mdadm passes map_num's
// result straight to printf("%s") (MD_LEVEL=): glibc prints "(null)".
func levelNameOrNull(level int) string {
	if n, ok := mapNum(persTable, level); ok {
		return n
	}
	return "(null)"
}

// layoutName returns the name mdadm prints on the "Layout :" line for a
// level, and whether mdadm prints such a line for the level at all
// (raid0 only when the RAID0_LAYOUT feature is set: pass raid0Layout).
// raid10 layouts use r10LayoutText. Unknown values give "-unknown-".
func layoutName(level int, layout uint32, raid0Layout bool) (string, bool) {
	switch level {
	case superblock.LevelRAID0:
		if !raid0Layout {
			return "", false
		}
	case superblock.LevelRAID5, superblock.LevelRAID6:
	case superblock.LevelRAID10:
		return r10LayoutText(layout), true
	default:
		return "", false
	}
	return plan.LayoutName(level, layout), true
}

// r10LayoutText is what mdadm's print_r10_layout writes after "Layout :":
// " near=N" unless near copies are 1, then ", far=N" (or ", offset=N"
// with bit 16) unless far copies are 1, and "NO REDUNDANCY" (no space)
// when both are 1. The text starts with a space except in that last case.
func r10LayoutText(layout uint32) string {
	t := plan.LayoutName(superblock.LevelRAID10, layout)
	if t == "NO REDUNDANCY" {
		return t
	}
	return " " + t
}

// r10LayoutShort is the mdadm --layout spelling of a raid10 layout
// ("n2", "f2", "o2"), for JSON.
func r10LayoutShort(layout uint32) string {
	near, far := superblock.RAID10Near(layout), superblock.RAID10Far(layout)
	switch {
	case far <= 1:
		return "n" + strconv.Itoa(near)
	case superblock.RAID10Offset(layout) && near <= 1:
		return "o" + strconv.Itoa(far)
	case near <= 1:
		return "f" + strconv.Itoa(far)
	}
	return r10LayoutText(layout)
}

// cString returns b up to its first NUL (all of b without one), the way
// printf("%s") and the string functions read a C char array.
func cString(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// printQuoted is mdadm's print_quoted: s unchanged when it has no space,
// tab or quote; otherwise surrounded by double quotes (single quotes when
// the first quote character in s is a double quote), switching the
// quoting style at every quote character that would end it.
func printQuoted(s string) string {
	var first byte
scan:
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'', '"':
			first = s[i]
			break scan
		case ' ', '\t':
			first = s[i]
		}
	}
	if first == 0 {
		return s
	}
	q := byte('"')
	if first == '"' {
		q = '\''
	}
	var b strings.Builder
	b.WriteByte(q)
	for i := 0; i < len(s); i++ {
		if s[i] == q {
			b.WriteByte(q)
			q ^= '"' ^ '\''
			b.WriteByte(q)
		}
		b.WriteByte(s[i])
	}
	b.WriteByte(q)
	return b.String()
}

// printEscape is mdadm's print_escape: space and tab become '_', '/'
// becomes '-' (for names used as device names). mdtool extends it: quotes,
// the backslash and every byte plan.EscapeName would escape (control characters,
// invalid UTF-8, unprintable runes) become '_' too, so that a device name
// made from an array name is one plain word of an ARRAY line and a safe
// file name (mdadm 4.2 passes those bytes through).
func printEscape(s string) string {
	r := strings.NewReplacer(" ", "_", "\t", "_", "/", "-", `"`, "_", "'", "_", `\`, "_")
	return strings.ReplaceAll(plan.MapUnsafe(r.Replace(s), '_'), "active(", "active_")
}

// confValue is a name as an mdadm.conf word: escName's form, with the '('
// of "active(" written as \x28 (mdadm's conf_word, and cmd's reader, turn
// that '(' into a space, even inside quotes: "name=h:active(uuid=..." would
// become a second uuid=), then quoted as mdadm's print_quoted does.
func confValue(s string) string {
	return printQuoted(strings.ReplaceAll(escName(s), "active(", `active\x28`))
}

// escName is how every text output shows an array name, a homehost or a
// device name read from a superblock or a daemon: plan.EscapeName's
// C-style escapes, so that no control byte reaches a terminal, a
// configuration line, a mail header or a log line.
func escName(s string) string { return plan.EscapeName(s) }

// jsonSafe makes encoding/json's output as safe for a terminal as
// escName's text: encoding/json escapes the bytes below 0x20 (and turns
// invalid UTF-8 into U+FFFD) but writes DEL, C1 controls and other
// unprintable runes (bidi overrides, ...) raw; jsonSafe writes them as
// \uXXXX escapes. Such bytes only occur inside JSON strings, so the
// document means the same.
func jsonSafe(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == 0x7f || (r >= 0x80 && r != utf8.RuneError && !unicode.IsPrint(r)) {
			if out == nil {
				out = append(out, b[:i]...)
			}
			for _, u := range utf16.Encode([]rune{r}) {
				out = append(out, fmt.Sprintf(`\u%04x`, u)...)
			}
		} else if out != nil {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	if out == nil {
		return b
	}
	return out
}

// exportValue is the VALUE of an --export KEY=VALUE line: escName's form,
// bare when it holds only characters neither a shell nor udev's
// IMPORT{program} treats specially (all names mdadm's create makes),
// else in single quotes (both strip them), a single quote inside being
// written as \x27. eval "$(mdtool --detail --export MD)" is safe.
func exportValue(s string) string {
	e := escName(s)
	for i := 0; i < len(e); i++ {
		c := e[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_:.,+@%/=-", c) >= 0 {
			continue
		}
		return "'" + strings.ReplaceAll(e, "'", `\x27`) + "'"
	}
	return e
}

// strerror turns a Go error from the os package into the text glibc's
// strerror gives for the same errno ("No such file or directory"), as
// mdadm prints after "cannot open DEV: ".
func strerror(err error) string {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			break
		}
		next := u.Unwrap()
		if next == nil {
			break
		}
		err = next
	}
	s := err.Error()
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
