//go:build !unix

package kit

// lockFile cannot lock here: control planes install their CRDs.
func lockFile(string) (func(), error) { return nil, errNoLocking }
