package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"mdtool/internal/mdadm/member"
	"mdtool/ioctl"
)

func newZeroSuperblockCmd(env *Env) *cobra.Command {
	var force bool
	var metadata string
	c := &cobra.Command{
		Use:   "zero-superblock DEVICE...",
		Short: "Erase md superblocks from devices (mdadm --zero-superblock)",
		Long: `Erase the md superblock of each DEVICE, as mdadm --zero-superblock does.

Every md superblock found (v1.0, v1.1, v1.2 or 0.90) is overwritten with
zeros until none is left. The bitmap and bad-block log areas are left as
they are, like mdadm. The device is opened exclusively, with --force too
(as mdadm does): a block device in use or an image file that an mdtool
daemon or command holds is refused.

EXIT STATUS
  0  superblocks erased, or none found ("Unrecognised md component device")
  1  a write failed
  2  a device could not be opened`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			rv := ExitOK
			env := quietEnv(c, env) // mdadm's Kill says everything only when verbose >= 0
			for _, dev := range args {
				if msg, ok := forcedV1Missing(dev, metadata); ok && !force {
					fmt.Fprintf(env.Stderr, "mdtool: %s\n", msg)
					rv |= ExitUsage
					continue
				}
				rv |= zeroDevice(env, dev, force)
			}
			if rv != ExitOK {
				return exitStatus(rv)
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&force, "force", "f", false, "accepted as mdadm's --force; busy devices are still refused")
	c.Flags().StringVarP(&metadata, "metadata", "e", "", "superblock version expected (1.0, 1.1, 1.2): a device without one there is refused")
	return c
}

// zeroDevice erases every md superblock on dev, mdadm's Kill() in a loop:
// the first pass reports a device with no superblock, later passes stop
// quietly when none is left. It returns mdadm's status bits.
func zeroDevice(env *Env, dev string, force bool) ExitCode {
	// Exclusive even with --force, as mdadm's Kill: the lock is held from
	// the check to the last write.
	m, err := member.Open(dev, member.Exclusive)
	if err != nil {
		if errors.Is(err, ioctl.ErrNotMember) {
			fmt.Fprintf(env.Stderr, "mdtool: %s\n", openFailure(dev, err))
		}
		fmt.Fprintf(env.Stderr, "mdtool: Couldn't open %s for write - not zeroing\n", dev)
		return ExitUsage
	}
	defer m.Close()
	n, err := m.EraseSuperblocks()
	if err != nil {
		fmt.Fprintf(env.Stderr, "mdtool: Could not zero superblock on %s: %v\n", dev, err)
		return ExitFailure
	}
	if n == 0 {
		fmt.Fprintf(env.Stderr, "mdtool: Unrecognised md component device - %s\n", dev)
	}
	return ExitOK
}
