package cmd

// growBitmap adds, removes or re-chunks the write-intent bitmap
// (mdadm's Grow_addbitmap).
func growBitmap(env *Env, o *growOptions, md string) error {
	return exitf(ExitFailure, "--grow --bitmap is not supported yet")
}
