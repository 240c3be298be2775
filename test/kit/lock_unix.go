//go:build unix

package kit

import (
	"os"
	"syscall"
)

// lockFile holds an exclusive lock on path, made if missing, until the
// function it returns is called; it waits for any other holder.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file releases it as well
		f.Close()
	}, nil
}
