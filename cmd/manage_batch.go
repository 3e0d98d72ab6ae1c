package cmd

// markAddBatches marks every add (--add, --add-spare, --re-add) that
// another add follows directly: mdadm issues them one after the other
// and md's remove_and_add_spares sees them together, the spare added
// last taking the first free role.
func markAddBatches(ops []*manageOp) {
	isAdd := func(op *manageOp) bool {
		return op.disp == dispAdd || op.disp == dispAddSpare || op.disp == dispReAdd
	}
	for i := 0; i+1 < len(ops); i++ {
		ops[i].moreAdds = isAdd(ops[i]) && isAdd(ops[i+1])
	}
}
