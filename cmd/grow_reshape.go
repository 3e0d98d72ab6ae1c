package cmd

// growReshape changes the level, layout, chunk or number of devices of a
// striped array (restriping). Not supported yet (issue #14).
func growReshape(env *Env, o *growOptions, md string) error {
	return exitf(ExitFailure, "reshape (changing the level, layout, chunk size or number of devices of a striped array) is not supported yet")
}
