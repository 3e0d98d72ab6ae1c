package cmd

// growArraySize sets the exported size (--array-size, not stored).
func growArraySize(env *Env, o *growOptions, md string) error {
	return exitf(ExitFailure, "--grow --array-size is not supported yet")
}

// growShape handles mdadm's Grow_reshape: --size, raid1 --raid-devices, and
// (through growReshape) the changes that move data.
func growShape(env *Env, o *growOptions, md string) error {
	return growReshape(env, o, md)
}
