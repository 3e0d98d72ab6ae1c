package plan

import (
	"strings"
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
			return "", errorf(1, "%s is an invalid name for an md device.  Try /dev/md/%s", dev, dev[len("/dev/"):])
		}
		cname = base + dev[e:]
	default:
		cname = dev
	}
	if strings.Contains(cname, "/") {
		return "", errorf(1, "%s is an invalid name for an md device.", dev)
	}
	if cname == "" {
		return "", errorf(1, "%s is an invalid name for an md device (empty!).", dev)
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

// ResolveHomehost turns a --homehost value into the homehost mdadm uses:
// "" (not given), "<system>" and "<ignore>" mean the system host name;
// "<none>" means none (returned as ""). Anything else, "any" included, is
// used literally. The keywords are case-insensitive.
func ResolveHomehost(homehost, systemHostname string) string {
	if homehost == "" || strings.EqualFold(homehost, "<system>") || strings.EqualFold(homehost, "<ignore>") {
		homehost = systemHostname
	}
	if strings.EqualFold(homehost, "<none>") {
		return ""
	}
	return homehost
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
