//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package contractrefine

import "os"

// lockFile is a no-op where flock is unavailable; one host per DataDir is
// then the operator's responsibility.
func lockFile(*os.File) (func() error, error) {
	return func() error { return nil }, nil
}
