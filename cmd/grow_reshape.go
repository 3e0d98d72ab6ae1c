package cmd

// growReshape changes the level, layout, chunk or number of devices of a
// striped array: growLevel (grow_level.go) for a level change,
// growSameLevel (grow_restripe.go) otherwise.
func growReshape(env *Env, o *growOptions, md string) error {
	if o.level != "" {
		return growLevel(env, o, md) // grow_level.go
	}
	if o.size != "" {
		return exitMsg(ExitFailure, "cannot change component size at the same time as other changes.\n"+
			"   Change size first, then check data is intact before making other changes.")
	}
	cl, st, err := growDial(o, md)
	if err != nil {
		return err
	}
	defer cl.Close()
	return growSameLevel(env, o, cl, st, md) // grow_restripe.go
}
