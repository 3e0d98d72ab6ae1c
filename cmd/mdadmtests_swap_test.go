package cmd

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// mdadmShareSetup are steps that put what the translated tests need into
// a suite's share before anything runs (the same files serve mdtool's
// runs on the host and the guest's, where the share is /share).
var mdadmShareSetup []func(t *testing.T, share string)

// mdadm 4.2's tests/04r5swap, 05r1-grow-internal and 05r1-grow-internal-1
// (issue 16), translated in testdata/mdadm-tests; see mdadmTests.
func init() {
	mdadmShareSetup = append(mdadmShareSetup, buildSwapSuper)
	mdadmTests = append(mdadmTests,
		// 0.90's -E lists each member's major and minor, which image
		// files on the host do not have: mdtool runs in the VM too
		mdadmTest{name: "04r5swap", devs: 4, final: []int{0, 1, 2, 3}, inVM: true},
		mdadmTest{name: "05r1-grow-internal", devs: 3, final: []int{1, 2}},
		mdadmTest{name: "05r1-grow-internal-1", devs: 3, final: []int{1, 2}},
	)
	// The -X of the running array right after --grow adds the bitmap:
	// the bits that --grow set are cleared by the bitmap daemon
	// (daemon_sleep 1 s) at its own pace, so the dirty count is timing:
	// the kernel showed 0 dirty in the suite's run and 4736 of 4736 (100%)
	// in a run of the same -G and -X by hand (0.3 s later still 100%),
	// mdtool 100% a few ms after the grow. Every other field is compared.
	for _, name := range []string{"05r1-grow-internal", "05r1-grow-internal-1"} {
		mdadmKnown = append(mdadmKnown, mdadmKnownDiff{test: name, mask: regexp.MustCompile(`(?m)(^\s*Bitmap : \d+ bits \(chunks\), )\d+ dirty \([0-9.]+%\)`),
			repl: "${1}N dirty", item: "dirty bits right after --grow --bitmap=internal (timing of the bitmap daemon)"})
	}
}

// buildSwapSuper builds mdadm's tests helper swap_super
// (internal/testkit/swapsuper), static for the guest, as share/swap_super.
func buildSwapSuper(t *testing.T, share string) {
	cmd := exec.Command("go", "build", "-o", filepath.Join(share, "swap_super"), "../internal/testkit/swapsuper")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build swapsuper: %v\n%s", err, out)
	}
}
