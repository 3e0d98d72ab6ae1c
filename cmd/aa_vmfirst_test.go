package cmd

import "testing"

// The package's longest kernel tests, declared in the file that comes
// first by name. go test resumes a package's parallel tests in
// declaration order (files by name), two at a time in CI; the longest
// going first lets the short ones fill both guest slots at the end
// instead of one long test running alone there.

// TestMdadmTestSuite runs mdadm 4.2's own tests, translated, with mdadm
// in the oracle VM and with mdtool on the host, and compares
// (cmd/mdadmtests_test.go). Its two guests run at once.
func TestMdadmTestSuite(t *testing.T) { mdadmTestSuite(t) }

// TestProvisioningSequences runs the mdadm command sequences of public
// provisioning scripts the same way (cmd/provisioning_kernel_test.go).
func TestProvisioningSequences(t *testing.T) { provisioningSequences(t) }
