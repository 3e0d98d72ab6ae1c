package cmd

import (
	"mdtool/engine"
	"mdtool/internal/mdadm/member"
)

// check090Size is Manage_add's check for 0.90 arrays: a device larger
// than 4 TB is mostly wasted (a 0.90 component size is at most 4 TB), so
// --add wants --force. It returns errAbort when the add is refused.
func (m *manageRun) check090Size(op *manageOp) error {
	st, err := m.status()
	if err != nil || st.SuperMinor != engine.Minor090 {
		return nil // the daemon answers for itself
	}
	d, err := member.Open(op.abs, member.ReadOnly)
	if err != nil {
		return nil // the daemon reports the open's failure
	}
	size := d.Geom.Size
	d.Close()
	if size <= 4<<40 {
		return nil
	}
	if !m.force {
		m.errf("%s is larger than %s can effectively use.\n       Add --force is you really want to add this device.\n", op.dev, m.mddev)
		return errAbort
	}
	m.errf("%s is larger than %s can effectively use.\n       Adding anyway as --force was given.\n", op.dev, m.mddev)
	return nil
}
