//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package contractrefine

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock so that two hosts pointed at
// the same DataDir cannot interleave appends in one WAL.
func lockFile(f *os.File) (func() error, error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, err
	}
	return func() error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
}
