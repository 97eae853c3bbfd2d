//go:build !linux

package scratch

// isTmpfs: only Linux is known to offer /dev/shm as a tmpfs.
func isTmpfs(string) bool { return false }
