package plan

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ArrayName derives the array name mdadm 4.2 stores when --name is not
// given, from the md device named on the command line, and checks that
// device name the way mdadm's create_mddev does:
//
//	/dev/md0     -> "0"      /dev/md_d0 -> "d0"
//	/dev/md/home -> "home"   home       -> "home" (i.e. /dev/md/home)
//
// Names directly under /dev/ must be mdN or md_dN.
func ArrayName(mddev string) (string, error) {
	chosen, err := chosenName(mddev)
	if err != nil {
		return "", err
	}
	i := strings.LastIndexByte(chosen, '/')
	name := chosen[i+1:]
	if i+1 == len("/dev/") {
		switch {
		case strings.HasPrefix(name, "md_") && len(name) > 3:
			name = name[3:]
		case strings.HasPrefix(name, "md") && len(name) > 2 && isDigit(name[2]):
			name = name[2:]
		}
	}
	return name, nil
}

// chosenName is the path create_mddev settles on: the device itself when
// it is absolute, else /dev/md/NAME.
func chosenName(dev string) (string, error) {
	var cname string
	switch {
	case strings.HasPrefix(dev, "/dev/md/"):
		cname = dev[len("/dev/md/"):]
	case strings.HasPrefix(dev, "/dev/"):
		e := len(dev)
		for e > 0 && isDigit(dev[e-1]) {
			e--
		}
		base := dev[len("/dev/"):e] // "/dev/" has no digits, so e >= 5
		if e == len(dev) || (base != "md" && base != "md_d") {
			return "", &Refusal{Kind: MDNameTry, Arg: dev, Alt: dev[len("/dev/"):]}
		}
		cname = base + dev[e:]
	default:
		cname = dev
	}
	if strings.Contains(cname, "/") {
		return "", refuseArg(MDNameInvalid, dev)
	}
	if cname == "" {
		return "", refuseArg(MDNameEmpty, dev)
	}
	if strings.HasPrefix(dev, "/") {
		return dev, nil
	}
	return "/dev/md/" + cname, nil
}

// StoredName is the set_name mdadm's init_super1 stores for an array name
// and a homehost ("" = none): "homehost:name" when the name has no ':' and
// the result is shorter than 32 bytes, else the name cut to 31 bytes.
func StoredName(name, homehost string) string {
	if homehost != "" && !strings.Contains(name, ":") && len(homehost)+1+len(name) < 32 {
		return homehost + ":" + name
	}
	if len(name) > 31 {
		name = name[:31]
	}
	return name
}

// ResolveHomehost is mdadm 4.2's homehost rule (mdadm.c's main, config.c's
// HOMEHOST line), the one home of it. flag is --homehost and flagGiven
// whether it was given; confHomehost is mdadm.conf's HOMEHOST word (the
// first one other than <ignore>, "<none>" read as ""), nil without one;
// hostname is gethostname.
//
//   - --homehost=<ignore> skips mdadm.conf; another --homehost wins over
//     it; otherwise mdadm.conf's word is used;
//   - nothing, or "<system>", means the system host name (cut to 255
//     bytes; none when hostname fails);
//   - "" or "<none>" means no homehost, returned as "".
//
// The keywords are case-insensitive; anything else ("any" included) is
// used literally.
func ResolveHomehost(flag string, flagGiven bool, confHomehost *string, hostname func() (string, error)) string {
	hh, have := "", false
	if flagGiven && !strings.EqualFold(flag, "<ignore>") {
		hh, have = flag, true
	}
	if !have && !(flagGiven && strings.EqualFold(flag, "<ignore>")) && confHomehost != nil {
		hh, have = *confHomehost, true
	}
	if !have || strings.EqualFold(hh, "<system>") {
		if hostname != nil {
			if n, err := hostname(); err == nil {
				// gethostname into a 256-byte buffer, NUL terminated.
				if len(n) > 255 {
					n = n[:255]
				}
				hh, have = n, true
			}
		}
	}
	if !have || hh == "" || strings.EqualFold(hh, "<none>") {
		return ""
	}
	return hh
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Array names (and the homehost, which shares set_name's 32 bytes) are
// data: whatever bytes a superblock holds, they are shown with one
// escaping form, EscapeName, and never as raw control bytes. The same
// test, nameByteUnsafe, decides what is escaped (EscapeName), what a
// device name derived from a name maps to '_' (MapUnsafe), and what
// create refuses (CheckName).

// unsafeRuneAt reports the width of the rune at s[i] and whether it must
// not appear raw in text: bytes below 0x20, 0x7f, bytes that are not
// valid UTF-8, and runes that are not printable (C1 controls, Unicode
// format characters such as bidi overrides, line separators). The ASCII
// space is printable.
func unsafeRuneAt(s string, i int) (int, bool) {
	c := s[i]
	if c < utf8.RuneSelf {
		return 1, c < 0x20 || c == 0x7f
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n <= 1 {
		return 1, true
	}
	return n, !unicode.IsPrint(r)
}

// EscapeName returns s with every unsafe byte written C-style: "\n",
// "\t", "\r", "\xNN" for the other bytes (each byte of an unsafe rune,
// each byte of invalid UTF-8), and the backslash itself as "\\". A name
// without unsafe bytes or backslashes comes back unchanged; the result
// never holds a control byte. UnescapeName reverses it.
func EscapeName(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		n, unsafe := unsafeRuneAt(s, i)
		if !unsafe {
			if s[i] == '\\' {
				b.WriteString(`\\`)
			} else {
				b.WriteString(s[i : i+n])
			}
			i += n
			continue
		}
		for _, c := range []byte(s[i : i+n]) {
			switch c {
			case '\n':
				b.WriteString(`\n`)
			case '\t':
				b.WriteString(`\t`)
			case '\r':
				b.WriteString(`\r`)
			default:
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		n, unsafe := unsafeRuneAt(s, i)
		if unsafe || s[i] == '\\' {
			return true
		}
		i += n
	}
	return false
}

// UnescapeName reverses EscapeName: "\\", "\n", "\t", "\r" and "\xNN"
// become the bytes they stand for; any other backslash is kept as it is.
func UnescapeName(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'x':
			if i+3 < len(s) {
				if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 3
					continue
				}
			}
			b.WriteByte(c)
			continue
		default:
			b.WriteByte(c)
			continue
		}
		i++
	}
	return b.String()
}

// MapUnsafe replaces every unsafe rune of s (and every byte of invalid
// UTF-8) by repl: for names turned into device or file names, as
// mdadm's print_escape turns spaces into '_'.
func MapUnsafe(s string, repl byte) string {
	var b []byte
	for i := 0; i < len(s); {
		n, unsafe := unsafeRuneAt(s, i)
		if unsafe {
			if b == nil {
				b = append(b, s[:i]...)
			}
			b = append(b, repl)
		} else if b != nil {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	if b == nil {
		return s
	}
	return string(b)
}

// CheckName refuses an array name or homehost that create would store
// but that could not be shown or written into an ARRAY line as it is:
// control characters and other unsafe bytes (see EscapeName), white
// space, quotes, '#' and the backslash. mdadm 4.2 checks only the
// length; 4.3 and later allow even less (POSIX portable names). what
// names the value ("name", "homehost").
func CheckName(what, s string) error {
	for i := 0; i < len(s); {
		n, unsafe := unsafeRuneAt(s, i)
		bad := Char(-1)
		switch {
		case unsafe:
			bad = CharControl
		case unicode.IsSpace(rune(s[i])) || (n > 1 && unicode.IsSpace([]rune(s[i : i+n])[0])):
			bad = CharSpace
		case s[i] == '"' || s[i] == '\'':
			bad = CharQuote
		case s[i] == '#':
			bad = CharHash
		case s[i] == '\\':
			bad = CharBackslash
		}
		if bad >= 0 {
			return &Refusal{Kind: UnsafeName, What: what, Arg: s, Char: bad}
		}
		i += n
	}
	return nil
}
