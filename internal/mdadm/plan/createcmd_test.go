package plan

import (
	"fmt"
	"strings"

	"mdtool/superblock"
)

// shellWords splits a command line the way sh does for the simple quoting
// used in fixture scripts ('...', "...", backslash).
func shellWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			i++
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

// parseCreate turns an `mdadm --create ...` command line into Options
// (device sizes are filled in by the caller). It understands the options
// the fixture generators use.
func parseCreate(cmd string) (Options, error) {
	words, err := shellWords(cmd)
	if err != nil {
		return Options{}, err
	}
	if len(words) < 2 || words[0] != "mdadm" {
		return Options{}, fmt.Errorf("not an mdadm command: %q", cmd)
	}
	var o Options
	var positional []string
	withValue := map[string]string{
		"-l": "level", "--level": "level",
		"-n": "raid-devices", "--raid-devices": "raid-devices",
		"-x": "spare-devices", "--spare-devices": "spare-devices",
		"-c": "chunk", "--chunk": "chunk",
		"-p": "layout", "--layout": "layout", "--parity": "layout",
		"-z": "size", "--size": "size",
		"-e": "metadata", "--metadata": "metadata",
		"-b": "bitmap", "--bitmap": "bitmap",
		"--bitmap-chunk": "bitmap-chunk",
		"-N":             "name", "--name": "name",
		"--homehost": "homehost",
		"-u":         "uuid", "--uuid": "uuid",
		"--data-offset": "data-offset",
	}
	flags := map[string]string{
		"-C": "create", "--create": "create",
		"-R": "run", "--run": "run",
		"-f": "force", "--force": "force",
		"--assume-clean": "assume-clean",
		"-v":             "verbose", "--verbose": "verbose",
		"-q": "quiet", "--quiet": "quiet",
	}
	set := func(key, val string) error {
		var err error
		var n uint64
		switch key {
		case "level":
			o.Level = val
		case "raid-devices":
			_, err = fmt.Sscan(val, &o.RaidDevices)
		case "spare-devices":
			_, err = fmt.Sscan(val, &o.SpareDevices)
		case "chunk":
			o.ChunkKiB, err = ParseChunk(val)
		case "layout":
			o.Layout = val
		case "size":
			o.SizeKiB, err = ParseSize(val)
		case "metadata":
			o.Metadata = val
		case "bitmap":
			o.Bitmap = val
		case "bitmap-chunk":
			o.BitmapChunk, err = ParseBitmapChunk(val)
		case "name":
			o.Name = val
		case "homehost":
			o.Homehost = val
			if val == "" {
				o.Homehost = "<none>"
			}
		case "uuid":
			var u [16]byte
			u, err = superblock.ParseUUID(val)
			o.UUID = &u
		case "data-offset":
			n, err = ParseSectors(val)
			o.DataOffset = n
		}
		return err
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		if f, ok := flags[w]; ok {
			switch f {
			case "run":
			case "force":
				o.Force = true
			case "assume-clean":
				o.AssumeClean = true
			}
			continue
		}
		if k, v, ok := strings.Cut(w, "="); ok && strings.HasPrefix(w, "--") {
			key, known := withValue[k]
			if !known {
				return Options{}, fmt.Errorf("unknown option %q in %q", k, cmd)
			}
			if err := set(key, v); err != nil {
				return Options{}, fmt.Errorf("%s: %v", w, err)
			}
			continue
		}
		if key, ok := withValue[w]; ok {
			if i+1 >= len(words) {
				return Options{}, fmt.Errorf("%s needs a value", w)
			}
			i++
			if err := set(key, words[i]); err != nil {
				return Options{}, fmt.Errorf("%s %s: %v", w, words[i], err)
			}
			continue
		}
		if len(w) > 2 && w[0] == '-' && w[1] != '-' {
			if key, ok := withValue[w[:2]]; ok {
				if err := set(key, w[2:]); err != nil {
					return Options{}, fmt.Errorf("%s: %v", w, err)
				}
				continue
			}
		}
		if strings.HasPrefix(w, "-") {
			return Options{}, fmt.Errorf("unknown option %q in %q", w, cmd)
		}
		positional = append(positional, w)
	}
	if len(positional) < 1 {
		return Options{}, fmt.Errorf("no md device in %q", cmd)
	}
	o.MDDevice = positional[0]
	for _, p := range positional[1:] {
		if p == "missing" {
			o.Devices = append(o.Devices, Device{Path: p, Missing: true})
		} else {
			o.Devices = append(o.Devices, Device{Path: p})
		}
	}
	return o, nil
}
