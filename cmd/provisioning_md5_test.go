package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var reKernelMD5 = regexp.MustCompile(`(?m)^md5=([0-9a-f]{32})$`)

// checkServedMD5 compares, for a sequence with md5 set, the md5 of the
// final array the kernel assembled from mdtool's images (kcheck's md5=
// line: the whole /dev/md9) with the md5 of the whole array as mdtool
// served it at the end of the script (served.md5, written by servedmd5).
func checkServedMD5(t *testing.T, share string, c mdadmTest, kcheck string) {
	t.Helper()
	if !c.md5 {
		return
	}
	b, err := os.ReadFile(filepath.Join(share, "mt", c.name, "served.md5"))
	if err != nil {
		t.Errorf("no md5 of the array mdtool served (servedmd5 at the end of %s.sh): %v", c.name, err)
		return
	}
	served := strings.TrimSpace(string(b))
	m := reKernelMD5.FindStringSubmatch(kcheck)
	switch {
	case m == nil:
		t.Errorf("the kernel gave no md5 of mdtool's final array:\n%s", kcheck)
	case len(served) != 32:
		t.Errorf("served.md5 holds %q, not an md5", served)
	case m[1] != served:
		t.Errorf("the kernel reads md5 %s from mdtool's final array, mdtool served %s", m[1], served)
	}
}
