// Package keyfile reads key-ring files: one key per line,
// "<key-id> <base64 secret>", blank lines and lines starting with # ignored,
// the first key the active one (it signs or encrypts), the rest kept so what
// they protected can still be read. The checkpoint signing keys
// (exechost/checkpoint) and the payload codec keys (internal/payloadcodec)
// share this one format and this one reader; each caller checks the secret
// length its algorithm needs through Load's check.
package keyfile

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
)

// Key is one key of a file.
type Key struct {
	ID     string
	Secret []byte
	// Line is the key's line in its file (1-based), for errors.
	Line int
}

// Error is a problem with one line of a key file.
type Error struct {
	Path string
	Line int
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// ErrNoKey: the file holds no key.
var ErrNoKey = errors.New("no key")

var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// CheckID reports a key ID that is not 1–64 letters, digits, '.', '_' or
// '-' starting with a letter or digit: IDs travel in manifests and payload
// metadata, so they stay short and printable.
func CheckID(id string) error {
	if !idPattern().MatchString(id) {
		return fmt.Errorf("key id %q must match %s", id, idPattern())
	}
	return nil
}

// Load reads the key file at path. The file must be a regular file (not a
// symlink) that only its owner can read or write (mode 0600 or 0400): it
// holds secrets. Every key must have a valid, unique ID and base64 secret,
// and pass check (nil: any length); a failing line is an *Error naming
// path:line. The secrets are never part of an error.
func Load(path string, check func(Key) error) ([]Key, error) {
	f, err := OpenPrivate(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, path, check)
}

// OpenPrivate opens a file of secrets (a key ring, a token) for reading:
// a regular file, not a symlink (whoever can write the link's directory
// could point it elsewhere), readable and writable by its owner only.
func OpenPrivate(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s: a symlink; give the file itself", path)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		f.Close()
		return nil, fmt.Errorf("%s: mode %04o, want 0600 (readable by its owner only)", path, perm)
	}
	return f, nil
}

// maxLine bounds one line: a key line is short, anything longer is not a
// key file.
const maxLine = 4096

// Parse reads keys from r as Load does, naming errors after path; it does
// not check file modes (Load does).
func Parse(r io.Reader, path string, check func(Key) error) ([]Key, error) {
	var keys []Key
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lineErr := func(format string, a ...any) error { return &Error{Path: path, Line: n, Err: fmt.Errorf(format, a...)} }
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, lineErr(`want "<key-id> <base64 secret>"`)
		}
		id := fields[0]
		if err := CheckID(id); err != nil {
			return nil, lineErr("%v", err)
		}
		if first, ok := seen[id]; ok {
			return nil, lineErr("key id %q already on line %d", id, first)
		}
		secret, err := base64.StdEncoding.DecodeString(fields[1])
		if err != nil {
			return nil, lineErr("secret of key %q is not base64", id)
		}
		k := Key{ID: id, Secret: secret, Line: n}
		if check != nil {
			if err := check(k); err != nil {
				return nil, lineErr("key %q: %v", id, err)
			}
		}
		seen[id] = n
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &Error{Path: path, Line: n + 1, Err: fmt.Errorf("line longer than %d bytes", maxLine)}
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrNoKey)
	}
	return keys, nil
}
