package cli

import "os"

// IsTerminal reports whether f is a character device (a terminal), without
// pulling in a terminal library.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
