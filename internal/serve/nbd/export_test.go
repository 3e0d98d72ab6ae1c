package nbd

// RequireBin is requireBin for the external test package.
var RequireBin = requireBin
