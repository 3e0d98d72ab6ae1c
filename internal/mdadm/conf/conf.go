// Package conf reads mdadm.conf, the configuration file of mdadm, for the
// commands that take --scan (examine, assemble, detail, monitor): the
// DEVICE, ARRAY, CREATE, HOMEHOST, MAILADDR, PROGRAM, ... lines, the
// device list they name and the device names mdadm gives device numbers.
// The syntax and the meaning of every line follow mdadm 4.2's config.c
// and lib.c (conf_word/conf_line) and the mdadm.conf(5) manual. Warnings
// are typed values (Warning: kind and the words at fault); cmd words and
// prints them as mdadm does.
package conf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"mdtool/internal/mdadm/plan"
	"mdtool/internal/nbdclient"
	"mdtool/superblock"
)

// Paths are the locations Load reads when it is given no path: File, or
// AltFile when File does not exist, and then the ".d" directory next to
// the file that was chosen (its *.conf files, in name order).
type Paths struct {
	File, Dir       string
	AltFile, AltDir string
}

// DefaultPaths are Debian's mdadm 4.2 locations.
var DefaultPaths = Paths{
	File:    "/etc/mdadm/mdadm.conf",
	Dir:     "/etc/mdadm/mdadm.conf.d",
	AltFile: "/etc/mdadm.conf",
	AltDir:  "/etc/mdadm.conf.d",
}

// Keywords of mdadm.conf, in mdadm's order. A line's first word selects
// the first keyword it is a case-insensitive prefix of, if it has at least
// three characters ("DEV", "arr", "HOMEH" ...).
var confKeywords = []string{
	"devices", "array", "mailaddr", "mailfrom", "program", "create",
	"homehost", "homecluster", "auto", "policy", "part-policy", "sysfs",
	"monitordelay",
}

// matchConfKeyword is mdadm's match_keyword: the keyword the word
// abbreviates (lower case), or "".
func matchConfKeyword(w string) string {
	if len(w) < 3 {
		return ""
	}
	for _, k := range confKeywords {
		if len(w) <= len(k) && strings.EqualFold(w, k[:len(w)]) {
			return k
		}
	}
	return ""
}

// Conf is a parsed mdadm.conf (with its .d directory).
type Conf struct {
	// Files lists the files that were read, in order.
	Files []string

	// Devices holds the words of the DEVICE lines in file order: glob
	// patterns of device paths, "partitions" (every device in
	// /proc/partitions) and "containers". Empty when there is no DEVICE
	// line; mdadm then uses "partitions containers".
	Devices []string

	// Arrays are the ARRAY lines that carry some identity, in file order.
	Arrays []Array

	MailAddr string // first word of the first MAILADDR line
	MailFrom string // the words of the MAILFROM lines, joined by spaces
	Program  string // first word of the first PROGRAM line

	// HomeHost is the first HOMEHOST word other than <ignore>, with
	// "<none>" turned into "" (HomeHostSet tells "" from no word at all).
	// "<system>" is kept as it is; see plan.ResolveHomehost.
	HomeHost    string
	HomeHostSet bool
	// IgnoreHomeHost is set by "HOMEHOST <ignore>".
	IgnoreHomeHost bool

	HomeCluster    string // like HomeHost, for HOMECLUSTER
	HomeClusterSet bool

	Create CreateLine // CREATE lines

	// Auto holds the words of the first AUTO line (later ones are
	// ignored, as mdadm does).
	Auto    []string
	AutoSet bool

	Policies     [][]string // words after POLICY, one slice per line
	PartPolicies [][]string // words after PART-POLICY
	Sysfs        [][]string // words after SYSFS

	MonitorDelay int // first word of the first MONITORDELAY line, 0 if none

	// Warnings are mdadm's complaints about the file, in the order found
	// (cmd words them as mdadm does).
	Warnings []Warning
}

// WarningKind is one of mdadm's complaints about a configuration file.
type WarningKind int

// The complaints of mdadm 4.2's config.c. Word is the word complained
// about; Other the second one where there are two.
const (
	UnknownKeyword        WarningKind = iota + 1 // a line's first word is no keyword
	DeviceLineWord                               // a DEVICE word that is no path, "partitions" or "containers"
	ArrayOneDevice                               // a second md device on an ARRAY line (Word: the first, Other: the second)
	ArrayInvalidName                             // an md device name mdadm does not take
	ArrayUUIDTwice                               // uuid= given twice
	ArrayBadUUID                                 // uuid= that does not parse
	ArraySuperMinorTwice                         // super-minor= given twice
	ArrayBadSuperMinor                           // super-minor= that is no minor number
	ArrayNameTwice                               // name= given twice
	ArrayNameTooLong                             // name= longer than 32 bytes
	ArrayBitmapTwice                             // bitmap= given twice
	ArrayDevicesTwice                            // devices= given twice
	ArraySpareGroupTwice                         // spare-group= given twice
	ArrayMetadataUnknown                         // metadata= naming no format (Word: the format)
	ArrayWord                                    // an ARRAY word mdadm does not know
	ArrayNoIdentity                              // an ARRAY line without uuid=, super-minor=, name= or devices= (Word: its device, "(null)" if none)
	CreateMissingOwner                           // CREATE owner= without a name
	CreateMissingGroup                           // CREATE group= without a name
	CreateMissingMode                            // CREATE mode= without a mode
	CreateBadMode                                // CREATE mode= that is no octal mode (Word: the mode)
	CreateMetadataUnknown                        // CREATE metadata= naming no format (Word: the format)
	CreateWord                                   // a CREATE word mdadm does not know
)

// Warning is one complaint about a configuration file.
type Warning struct {
	Kind  WarningKind
	Word  string
	Other string
}

// Array is one ARRAY line.
type Array struct {
	File string // file and line number of the keyword
	Line int

	Device string // the md device ("/dev/md0", "/dev/md/home", "<ignore>"), may be ""

	UUID    [16]byte // uuid=, bytes in the order written
	UUIDSet bool

	SuperMinor int    // super-minor=, -1 if not given
	Name       string // name= (mdadm 4.3 and later ignore it; 4.2 matches on it)
	Devices    string // devices=: comma separated glob patterns
	SpareGroup string // spare-group=
	Level      int    // level=, LevelUnset if not given or unknown
	RaidDisks  int    // num-devices= or disks=, -1 if not given
	Spares     int    // spares=, 0 if not given
	Metadata   string // metadata=
	Bitmap     string // bitmap=
	Container  string // container=
	Member     string // member=
	Auto       string // auto=

	// Name is unescaped (plan.UnescapeName: mdtool writes names escaped);
	// NameAsWritten is the name= value as mdadm 4.2 reads it, for a name
	// with a backslash in a line mdadm wrote.
	NameAsWritten string
}

// LevelUnset marks a level that was not given (mdadm's UnSet).
const LevelUnset = -1000000

// CreateLine holds the words of the CREATE lines. Fields are kept as
// written; an empty string means not given.
type CreateLine struct {
	Auto     string
	Owner    string // user name or number
	Group    string // group name or number
	Mode     uint32 // mode=, octal
	ModeSet  bool
	Metadata string
	Symlinks string // "yes", "no" or ""
	Names    string // "yes", "no" or ""
	BBL      string // "yes", "no" or "" (bad-block log on create)
}

// confLine is one logical line: a keyword and its words.
type confLine struct {
	line  int
	words []string
}

// confReader splits mdadm.conf text into logical lines exactly as mdadm's
// conf_word and conf_line do:
//
//   - words are separated by spaces and tabs;
//   - a line that starts with a space or tab continues the previous line;
//   - '#' at the start of a word starts a comment up to the end of the
//     line; comment lines and empty lines do not end a logical line;
//   - inside a word, "..." or '...' quote spaces and tabs (the quote
//     characters are removed); quoting stops at the end of the line.
type confReader struct {
	r        *bufio.Reader
	line     int // current line number (1-based)
	back     int // pushed-back byte, or -1
	wordLine int // line of the first character of the last word
}

const confEOF = -1

func (c *confReader) get() int {
	if c.back >= 0 {
		b := c.back
		c.back = -1
		if b == '\n' {
			c.line++
		}
		return b
	}
	b, err := c.r.ReadByte()
	if err != nil {
		return confEOF
	}
	if b == '\n' {
		c.line++
	}
	return int(b)
}

func (c *confReader) unget(b int) {
	if b == '\n' {
		c.line--
	}
	c.back = b
}

// word returns the next word, or ok=false at the end of the logical line
// (allowKey=false) or of the file.
func (c *confReader) word(allowKey bool) (string, bool) {
	var w []byte
	found := false
	for !found {
		ch := c.get()
		if ch == '#' {
			for ch != confEOF && ch != '\n' {
				ch = c.get()
			}
		}
		if ch == confEOF {
			break
		}
		if ch == '\n' {
			continue
		}
		if ch != ' ' && ch != '\t' && !allowKey {
			c.unget(ch)
			break
		}
		quote := 0
		for ch == ' ' || ch == '\t' {
			ch = c.get()
		}
		if ch != confEOF && ch != '\n' && ch != '#' {
			c.wordLine = c.line
			for ch != confEOF && ch != '\n' && (quote != 0 || (ch != ' ' && ch != '\t')) {
				found = true
				switch {
				case quote != 0 && ch == quote:
					quote = 0
				case quote == 0 && (ch == '\'' || ch == '"'):
					quote = ch
				default:
					w = append(w, byte(ch))
				}
				ch = c.get()
				// mdadm's hack for kernels that wrote "active(auto-read-only)"
				// in /proc/mdstat; conf_word applies it to every file.
				if ch == '(' && len(w) >= 6 && string(w[len(w)-6:]) == "active" {
					ch = ' '
				}
			}
		}
		if ch != confEOF {
			c.unget(ch)
		}
	}
	s := string(w)
	if s == "auto-read-only)" {
		s = "(auto-read-only)"
	}
	return s, found
}

// next returns the next logical line, or false at the end of the input.
func (c *confReader) next() (confLine, bool) {
	first, ok := c.word(true)
	if !ok {
		return confLine{}, false
	}
	l := confLine{line: c.wordLine, words: []string{first}}
	for {
		w, ok := c.word(false)
		if !ok {
			break
		}
		l.words = append(l.words, w)
	}
	return l, true
}

// splitConfLines returns the logical lines of an mdadm.conf text.
func splitConfLines(r io.Reader) []confLine {
	c := &confReader{r: bufio.NewReader(r), line: 1, back: -1}
	var out []confLine
	for {
		l, ok := c.next()
		if !ok {
			return out
		}
		out = append(out, l)
	}
}

// Parse parses mdadm.conf text read from r into conf (which may already
// hold lines from earlier files); name is the file name recorded with
// ARRAY lines.
func (conf *Conf) Parse(name string, r io.Reader) {
	for _, l := range splitConfLines(r) {
		args := l.words[1:]
		switch matchConfKeyword(l.words[0]) {
		case "devices":
			conf.deviceLine(args)
		case "array":
			conf.arrayLine(name, l.line, args)
		case "mailaddr":
			if conf.MailAddr == "" && len(args) > 0 {
				conf.MailAddr = args[0]
			}
		case "mailfrom":
			for _, w := range args {
				if conf.MailFrom == "" {
					conf.MailFrom = w
				} else {
					conf.MailFrom += " " + w
				}
			}
		case "program":
			if conf.Program == "" && len(args) > 0 {
				conf.Program = args[0]
			}
		case "create":
			conf.createLine(args)
		case "homehost":
			for _, w := range args {
				switch {
				case strings.EqualFold(w, "<ignore>"):
					conf.IgnoreHomeHost = true
				case !conf.HomeHostSet:
					conf.HomeHostSet = true
					if strings.EqualFold(w, "<none>") {
						conf.HomeHost = ""
					} else {
						conf.HomeHost = w
					}
				}
			}
		case "homecluster":
			for _, w := range args {
				if !conf.HomeClusterSet {
					conf.HomeClusterSet = true
					if strings.EqualFold(w, "<none>") {
						conf.HomeCluster = ""
					} else {
						conf.HomeCluster = w
					}
				}
			}
		case "auto":
			if !conf.AutoSet {
				conf.AutoSet = true
				conf.Auto = append([]string(nil), args...)
			}
		case "policy":
			conf.Policies = append(conf.Policies, args)
		case "part-policy":
			conf.PartPolicies = append(conf.PartPolicies, args)
		case "sysfs":
			conf.Sysfs = append(conf.Sysfs, args)
		case "monitordelay":
			if conf.MonitorDelay == 0 && len(args) > 0 {
				conf.MonitorDelay = confStrtol(args[0])
			}
		default:
			conf.warn(UnknownKeyword, l.words[0])
		}
	}
}

func (conf *Conf) warn(k WarningKind, words ...string) {
	w := Warning{Kind: k}
	if len(words) > 0 {
		w.Word = words[0]
	}
	if len(words) > 1 {
		w.Other = words[1]
	}
	conf.Warnings = append(conf.Warnings, w)
}

func (conf *Conf) deviceLine(args []string) {
	for _, w := range args {
		if strings.HasPrefix(w, "/") || nbdclient.IsURI(w) || strings.EqualFold(w, "partitions") || strings.EqualFold(w, "containers") {
			conf.Devices = append(conf.Devices, w)
		} else {
			// mdadm 4.2's spelling.
			conf.warn(DeviceLineWord, w)
		}
	}
}

// confIsNumber reports whether w is one or more digits and nothing else.
func confIsNumber(w string) bool {
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return false
		}
	}
	return true
}

// confHasPrefixFold is strncasecmp(s, prefix, len(prefix)) == 0.
func confHasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// confAtoi is C's atoi: leading blanks, optional sign, digits; 0 if none.
func confAtoi(s string) int {
	return confStrtol(s)
}

// confStrtol parses like strtol(s, NULL, 10), saturating at the int range.
func confStrtol(s string) int {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v int64
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if v < 1<<40 {
			v = v*10 + int64(s[i]-'0')
		}
	}
	if neg {
		v = -v
	}
	return int(v)
}

func (conf *Conf) arrayLine(file string, line int, args []string) {
	a := Array{File: file, Line: line, SuperMinor: -1, Level: LevelUnset, RaidDisks: -1}
	devSet := false
	for _, w := range args {
		switch {
		case strings.HasPrefix(w, "/") || !strings.Contains(w, "="):
			if strings.EqualFold(w, "<ignore>") ||
				strings.HasPrefix(w, "/dev/md/") ||
				!strings.HasPrefix(w, "/") && !strings.HasPrefix(w, "<") ||
				(strings.HasPrefix(w, "/dev/md") && confIsNumber(w[7:])) ||
				(strings.HasPrefix(w, "/dev/md_d") && confIsNumber(w[9:])) {
				if devSet {
					conf.warn(ArrayOneDevice, a.Device, w)
				} else {
					a.Device, devSet = w, true
				}
			} else {
				conf.warn(ArrayInvalidName, w)
			}
		case confHasPrefixFold(w, "uuid="):
			if a.UUIDSet {
				conf.warn(ArrayUUIDTwice, w)
			} else if u, ok := ParseUUIDText(w[5:]); ok {
				a.UUID, a.UUIDSet = u, true
			} else {
				conf.warn(ArrayBadUUID, w)
			}
		case confHasPrefixFold(w, "super-minor="):
			if a.SuperMinor != -1 {
				conf.warn(ArraySuperMinorTwice, w)
			} else if n, err := strconv.ParseInt(w[12:], 10, 32); err != nil || n < 0 {
				conf.warn(ArrayBadSuperMinor, w)
			} else {
				a.SuperMinor = int(n)
			}
		case confHasPrefixFold(w, "name="):
			switch {
			case a.Name != "":
				conf.warn(ArrayNameTwice, w)
			case len(plan.UnescapeName(w[5:])) > 32:
				conf.warn(ArrayNameTooLong, w)
			default:
				// mdtool's ARRAY lines write the name escaped
				// (plan.EscapeName); a name without a backslash
				// reads as mdadm reads it.
				a.Name, a.NameAsWritten = plan.UnescapeName(w[5:]), w[5:]
			}
		case confHasPrefixFold(w, "bitmap="):
			if a.Bitmap != "" {
				conf.warn(ArrayBitmapTwice, w)
			} else {
				a.Bitmap = w[7:]
			}
		case confHasPrefixFold(w, "devices="):
			if a.Devices != "" {
				conf.warn(ArrayDevicesTwice, w)
			} else {
				a.Devices = w[8:]
			}
		case confHasPrefixFold(w, "spare-group="):
			if a.SpareGroup != "" {
				conf.warn(ArraySpareGroupTwice, w)
			} else {
				a.SpareGroup = w[12:]
			}
		case confHasPrefixFold(w, "level="):
			if n, ok := plan.MapNameFold(plan.PersTable, w[6:]); ok {
				a.Level = n
			} else {
				a.Level = LevelUnset
			}
		case confHasPrefixFold(w, "disks="):
			a.RaidDisks = confAtoi(w[6:])
		case confHasPrefixFold(w, "num-devices="):
			a.RaidDisks = confAtoi(w[12:])
		case confHasPrefixFold(w, "spares="):
			a.Spares = confAtoi(w[7:])
		case confHasPrefixFold(w, "metadata="):
			if knownMetadata(w[9:]) {
				a.Metadata = w[9:]
			} else {
				conf.warn(ArrayMetadataUnknown, w[9:])
			}
		case confHasPrefixFold(w, "auto="):
			a.Auto = w[5:]
		case confHasPrefixFold(w, "member="):
			a.Member = w[7:]
		case confHasPrefixFold(w, "container="):
			a.Container = w[10:]
		default:
			conf.warn(ArrayWord, w)
		}
	}
	if !a.UUIDSet && a.Devices == "" && a.SuperMinor == -1 && a.Name == "" &&
		(a.Container == "" || a.Member == "") {
		dev := a.Device
		if !devSet {
			dev = "(null)"
		}
		conf.warn(ArrayNoIdentity, dev)
		return
	}
	conf.Arrays = append(conf.Arrays, a)
}

// knownMetadata reports whether one of mdadm 4.2's metadata handlers
// accepts the name (match_metadata_desc of 0.90, 1.x, ddf, imsm, mbr and
// gpt, tried in that order).
func knownMetadata(s string) bool {
	s0 := s
	for len(s0) >= 2 && s0[0] == '0' && s0[1] == '0' {
		s0 = s0[1:]
	}
	switch s0 {
	case "0", "0.90", "", "0.91", "0.swap", "0.9":
		return true
	}
	switch strings.TrimLeft(s, "0") {
	case "1.0", "1.00", "1.1", "1.01", "1.2", "1.02", "1", "default":
		return true
	}
	switch s {
	case "ddf", "imsm", "mbr", "gpt":
		return true
	}
	return false
}

func (conf *Conf) createLine(args []string) {
	c := &conf.Create
	for _, w := range args {
		switch {
		case confHasPrefixFold(w, "auto="):
			c.Auto = w[5:]
		case confHasPrefixFold(w, "owner="):
			if len(w) == 6 {
				conf.warn(CreateMissingOwner)
				continue
			}
			c.Owner = w[6:]
		case confHasPrefixFold(w, "group="):
			if len(w) == 6 {
				conf.warn(CreateMissingGroup)
				continue
			}
			c.Group = w[6:]
		case confHasPrefixFold(w, "mode="):
			if len(w) == 5 {
				conf.warn(CreateMissingMode)
				continue
			}
			m, err := strconv.ParseUint(w[5:], 8, 32)
			if err != nil {
				c.Mode = 0600
				conf.warn(CreateBadMode, w[5:])
			} else {
				c.Mode = uint32(m)
			}
			c.ModeSet = true
		case confHasPrefixFold(w, "metadata="):
			if knownMetadata(w[9:]) {
				if c.Metadata == "" {
					c.Metadata = w[9:]
				}
			} else {
				conf.warn(CreateMetadataUnknown, w[9:])
			}
		case confHasPrefixFold(w, "symlinks=yes"):
			c.Symlinks = "yes"
		case confHasPrefixFold(w, "symlinks=no"):
			c.Symlinks = "no"
		case confHasPrefixFold(w, "names=yes"):
			c.Names = "yes"
		case confHasPrefixFold(w, "names=no"):
			c.Names = "no"
		case confHasPrefixFold(w, "bbl=no"):
			c.BBL = "no"
		case confHasPrefixFold(w, "bbl=yes"):
			c.BBL = "yes"
		default:
			conf.warn(CreateWord, w)
		}
	}
}

// ParseUUIDText is mdadm's parse_uuid (superblock.ParseUUID) as a
// found/not-found answer.
func ParseUUIDText(s string) ([16]byte, bool) {
	u, err := superblock.ParseUUID(s)
	return u, err == nil
}

// Load reads mdadm.conf the way mdadm 4.2 does:
//
//   - path "" reads def.File, or def.AltFile when that does not exist,
//     and then the matching ".d" directory;
//   - path "partitions" reads no file and acts as "DEVICE partitions";
//   - path "none" reads nothing;
//   - any other path is read if it exists; when it is a directory, its
//     *.conf files are read in name order.
//
// A missing file is not an error (mdadm runs with its defaults); an
// unreadable one is.
func Load(path string, def Paths) (*Conf, error) {
	conf := &Conf{}
	switch path {
	case "partitions":
		conf.Devices = []string{"partitions"}
		return conf, nil
	case "none":
		return conf, nil
	}
	dir := ""
	if path == "" {
		path, dir = def.File, def.Dir
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if _, err := os.Stat(def.AltFile); err == nil {
				path, dir = def.AltFile, def.AltDir
			}
		}
	}
	if err := conf.readFileOrDir(path); err != nil {
		return nil, err
	}
	if dir != "" {
		if err := conf.readFileOrDir(dir); err != nil {
			return nil, err
		}
	}
	return conf, nil
}

func (conf *Conf) readFileOrDir(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode().IsRegular() {
		return conf.readFile(path)
	}
	if !st.IsDir() {
		return nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") || len(n) < 6 || !strings.HasSuffix(n, ".conf") {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(path, n)
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		if err := conf.readFile(p); err != nil {
			return err
		}
	}
	return nil
}

func (conf *Conf) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	conf.Files = append(conf.Files, path)
	conf.Parse(path, f)
	return nil
}

// ProcPartitions is the file mdadm reads for "DEVICE partitions".
var ProcPartitions = "/proc/partitions"

// DeviceList is mdadm's conf_get_devs: the devices the DEVICE lines name,
// in mdadm's order. mdadm builds the list by prepending, so the result
// is, for the DEVICE words taken in order: the devices of every
// "partitions" word (each in reverse /proc/partitions order) and of every
// "containers" word, preceded by the glob matches of all the patterns
// (each pattern's matches sorted, the whole list reversed). Without a
// DEVICE line the list is "partitions containers". mdtool has no
// external-metadata containers, so "containers" adds nothing.
func (conf *Conf) DeviceList() []string {
	var list []string
	if len(conf.Devices) == 0 {
		return loadPartitions()
	}
	var globbed []string
	for i := len(conf.Devices) - 1; i >= 0; i-- {
		w := conf.Devices[i]
		switch {
		case strings.EqualFold(w, "partitions"):
			list = append(list, loadPartitions()...)
		case strings.EqualFold(w, "containers"):
		case nbdclient.IsURI(w):
			globbed = append(globbed, w) // a member on an NBD server: not a pattern
		default:
			m, _ := filepath.Glob(w)
			sort.Strings(m)
			globbed = append(globbed, m...)
		}
	}
	out := make([]string, 0, len(globbed)+len(list))
	for i := len(globbed) - 1; i >= 0; i-- {
		out = append(out, globbed[i])
	}
	return append(out, list...)
}

// loadPartitions is mdadm's load_partitions: every device listed in
// /proc/partitions, named as map_dev names it, last line first.
func loadPartitions() []string {
	f, err := os.Open(ProcPartitions)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if len(l) > 1023 {
			l = l[:1023]
		}
		if !strings.HasPrefix(l, " ") {
			continue
		}
		fs := strings.Fields(l)
		if len(fs) < 4 {
			continue
		}
		major, err1 := strconv.ParseUint(fs[0], 10, 32)
		minor, err2 := strconv.ParseUint(fs[1], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		name := NameDev(uint32(major), uint32(minor))
		if name == "" {
			if _, err := os.Stat("/dev/" + fs[3]); err == nil {
				name = "/dev/" + fs[3]
			} else {
				name = fmt.Sprintf("%d:%d", major, minor)
			}
		}
		out = append([]string{name}, out...)
	}
	return out
}

// NameDev names a device of /proc/partitions by its numbers (MapDev;
// tests replace it).
var NameDev = MapDev

// DevDir is the directory MapDev searches.
var DevDir = "/dev"

// MapDev is mdadm's map_dev: the shortest path of a block device
// node under DevDir with the given numbers (symbolic links are not
// followed), preferring names under /dev/md/; "" if there is none. Like
// mdadm it walks the directory once, and again when a number is missing.
func MapDev(major, minor uint32) string {
	if major == 0 && minor == 0 {
		return ""
	}
	devNodes.Lock()
	defer devNodes.Unlock()
	key := [2]uint32{major, minor}
	fresh := false
	if devNodes.names == nil || devNodes.dir != DevDir {
		devNodes.names, devNodes.dir = scanDevNodes(DevDir), DevDir
		fresh = true
	}
	name, ok := devNodes.names[key]
	if !ok && !fresh {
		devNodes.names = scanDevNodes(DevDir)
		name = devNodes.names[key]
	}
	return name
}

// devNodes caches the block device nodes found under DevDir.
var devNodes struct {
	sync.Mutex
	dir   string
	names map[[2]uint32]string
}

// scanDevNodes maps device numbers to the name map_dev would choose.
func scanDevNodes(dir string) map[[2]uint32]string {
	regular := map[[2]uint32]string{}
	preferred := map[[2]uint32]string{}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeDevice == 0 || d.Type()&os.ModeCharDevice != 0 {
			return nil
		}
		ma, mi, ok := devNodeNumbers(path)
		if !ok {
			return nil
		}
		k := [2]uint32{ma, mi}
		m := regular
		if strings.HasPrefix(path, "/dev/md/") {
			m = preferred
		}
		if old, ok := m[k]; !ok || len(path) < len(old) {
			m[k] = path
		}
		return nil
	})
	for k, v := range preferred {
		regular[k] = v
	}
	return regular
}

// devNodeNumbers returns the major and minor numbers of a device node (not
// following a final symbolic link).
func devNodeNumbers(path string) (uint32, uint32, bool) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0, 0, false
	}
	return unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), true
}
