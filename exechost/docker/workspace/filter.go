// Package workspace moves /workspace contents in and out of a sandbox as tar
// streams: git import (exechost/gitsource), checkpoint export and restore, and the path
// safety filter every incoming and outgoing stream passes through.
//
// Tar never touches the host file system here: streams are produced and
// consumed by `tar` running as the sandbox user inside the container (docker
// cp cannot see tmpfs contents, and CopyToContainer fails on a read-only
// rootfs). The filter still refuses anything that could escape /workspace
// inside the sandbox.
package workspace

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/agentflow/agentflow/exechost"
)

// ErrUnsafeEntry matches every entry the filter refuses.
var ErrUnsafeEntry = errors.New("unsafe tar entry")

// ErrTooLarge is returned when a stream passes its byte or entry bound.
var ErrTooLarge = errors.New("workspace stream too large")

// EntryError names the refused entry and why.
type EntryError struct {
	Name   string
	Reason string
}

func (e *EntryError) Error() string { return fmt.Sprintf("tar entry %q: %s", e.Name, e.Reason) }

// Is makes every *EntryError match ErrUnsafeEntry.
func (e *EntryError) Is(target error) bool { return target == ErrUnsafeEntry }

// Limits bound one filtered stream (all layers together).
type Limits struct {
	// MaxBytes bounds the total size of regular-file content.
	MaxBytes int64
	// MaxEntries bounds the number of entries.
	MaxEntries int
}

const (
	maxNameBytes      = 4096
	maxComponentBytes = 255
	// perEntryOverhead is what a tar stream may add per entry beyond the
	// content: header, long-name records and padding.
	perEntryOverhead = 3 * 512
)

// MaxStreamBytes is the largest raw tar stream that can carry content
// within l; anything longer is refused before it is parsed further.
func (l Limits) MaxStreamBytes() int64 {
	return l.MaxBytes + int64(l.MaxEntries+2)*perEntryOverhead + 10*512
}

// Filter validates and normalises tar entries. One Filter sees every layer
// of one workspace in order, so it knows every symlink already placed and can
// refuse an entry that would be written through one (also across layers).
//
// Allowed: regular files, directories, symlinks that obey
// exechost.CheckSymlink (so chains of links stay inside too). Refused: a
// malformed stream (ErrMalformedArchive), a name twice in one layer, absolute names, ".." components, names through a
// symlink, symlinks that point out (or absolute), hard links, devices, FIFOs,
// sparse files and unknown types. Ownership is dropped and modes are reduced
// to permission bits (no setuid/setgid/sticky); directories keep u+rwx so
// the non-root extractor can fill them.
type Filter struct {
	limits    Limits
	symlinks  map[string]bool
	bytes     int64
	entries   int
	redact    []string
	redactor  *Redactor // nil when there is nothing to redact
	inherited map[string]string
	copyBuf   []byte
	names     map[string]string // accepted entries, when recording
}

// NewFilter returns a filter with empty state.
func NewFilter(l Limits) *Filter {
	return &Filter{limits: l, symlinks: make(map[string]bool)}
}

// Redaction is what an export keeps out of the stored stream.
type Redaction struct {
	// Values must not be stored: occurrences in regular-file content become
	// RedactByte bytes (see Redactor); an entry whose name or symlink target
	// contains one is refused with an error matching ErrSecretName.
	Values []string
	// Inherited are the entries the workspace was provisioned with (Names of
	// its import): clean name → symlink target ("" for other entries). An
	// entry found there unchanged is exempt from the name refusal: its name
	// came from a stored checkpoint or a repository, not from this step, and
	// refusing it would only make a step that reads a file named by a
	// secret unable to checkpoint.
	Inherited map[string]string
}

// Redact makes the filter apply r. A name refusal drains the rest of the
// source instead of failing it, so the process producing the stream (tar
// in the sandbox) ends normally rather than being destroyed. Call before
// Copy.
func (f *Filter) Redact(r Redaction) {
	f.redact = r.Values
	f.redactor = NewRedactor(r.Values)
	f.inherited = r.Inherited
}

// RecordNames makes the filter remember every accepted entry (see Names).
func (f *Filter) RecordNames() { f.names = map[string]string{} }

// Names are the accepted entries, clean name → symlink target ("" for
// files and directories), later layers overriding earlier ones; nil unless
// RecordNames was called.
func (f *Filter) Names() map[string]string { return f.names }

// Bytes is the regular-file content passed so far.
func (f *Filter) Bytes() int64 { return f.bytes }

// Entries is the number of entries passed so far.
func (f *Filter) Entries() int { return f.entries }

// Copy reads one tar stream from src and writes the accepted entries to dst
// (dst is not closed, so several layers can share one output). The raw
// stream is bounded by Limits.MaxStreamBytes. The first refused entry stops
// the copy with an error matching ErrUnsafeEntry or ErrTooLarge.
func (f *Filter) Copy(dst *tar.Writer, src io.Reader) error {
	return f.begin(src).copyTo(dst)
}

// layerCopy is one stream going through a Filter, in two parts: next reads
// up to the next entry to write (so an import can see whether a layer
// holds any entry before an exec exists), copyTo writes that entry and the
// rest. Both apply exactly Copy's rules; Copy is begin + copyTo.
type layerCopy struct {
	f    *Filter
	as   *archiveSource
	tr   *tar.Reader
	seen map[string]bool // names of this layer: a repeated one is malformed
	// held is an entry next returned and hold kept: its header is
	// checked and counted, its content not yet read.
	held *tar.Header
}

func (f *Filter) begin(src io.Reader) *layerCopy {
	as := &archiveSource{r: NewBoundedReader(src, f.limits.MaxStreamBytes())}
	return &layerCopy{f: f, as: as, tr: tar.NewReader(as), seen: map[string]bool{}}
}

// next returns the next entry to write, checked and normalised, with the
// stream standing at its content; nil once the archive ended, which means
// the stream was read to its last byte and found well-formed (see
// archiveSource.finish). Entries written to nothing (the workspace root,
// pax globals) are passed over.
func (l *layerCopy) next() (*tar.Header, error) {
	if h := l.held; h != nil {
		l.held = nil
		return h, nil
	}
	for {
		// Whatever archive/tar would skip is read here, so the position
		// before Next is the end of the last entry's content.
		if _, err := io.Copy(io.Discard, l.tr); err != nil {
			return nil, l.as.fail(err)
		}
		at := l.as.n
		hdr, err := l.tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, l.as.finish(at)
		}
		if err != nil {
			return nil, fmt.Errorf("read tar: %w", l.as.fail(err))
		}
		out, err := l.f.check(hdr, l.seen)
		if errors.Is(err, ErrSecretName) {
			return nil, l.f.drain(l.tr, err)
		}
		if err != nil {
			return nil, err
		}
		if out != nil {
			return out, nil
		}
	}
}

// hold gives h (just returned by next) back, for copyTo to write first.
func (l *layerCopy) hold(h *tar.Header) { l.held = h }

// copyTo writes every remaining entry (a held one first) to dst.
func (l *layerCopy) copyTo(dst *tar.Writer) error {
	for {
		out, err := l.next()
		if err != nil || out == nil {
			return err
		}
		if err := dst.WriteHeader(out); err != nil {
			return fmt.Errorf("write tar header %q: %w", out.Name, err)
		}
		if out.Typeflag == tar.TypeReg {
			w := &recordingWriter{w: dst}
			if err := l.f.copyContent(w, l.tr, out.Size); err != nil {
				if w.err == nil { // the source broke, not the destination
					err = l.as.fail(err)
				}
				return fmt.Errorf("copy %q: %w", out.Name, err)
			}
		}
	}
}

// recordingWriter remembers whether the destination failed.
type recordingWriter struct {
	w   io.Writer
	err error
}

func (r *recordingWriter) Write(p []byte) (int, error) {
	n, err := r.w.Write(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

// copyContent copies one entry's content, redacted when values are set.
// The Redactor keeps the length, so exactly size bytes are written.
func (f *Filter) copyContent(dst io.Writer, src io.Reader, size int64) error {
	if f.redactor == nil {
		_, err := io.CopyN(dst, src, size)
		return err
	}
	if f.copyBuf == nil {
		f.copyBuf = make([]byte, redactChunk)
	}
	f.redactor.Reset(io.LimitReader(src, size))
	n, err := io.CopyBuffer(dst, f.redactor, f.copyBuf)
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// drain reads the rest of the stream without writing it and returns
// refusal: the stream's producer finishes normally, while the caller still
// stores nothing. The raw stream stays bounded by MaxStreamBytes.
func (f *Filter) drain(tr *tar.Reader, refusal error) error {
	for {
		if _, err := tr.Next(); err != nil {
			return refusal
		}
	}
}

// check validates one header and returns the normalised header to write,
// or nil for entries that are skipped (the root directory, pax globals).
func (f *Filter) check(hdr *tar.Header, seen map[string]bool) (*tar.Header, error) {
	raw := hdr.Name
	refuse := func(format string, args ...any) (*tar.Header, error) {
		return nil, &EntryError{Name: raw, Reason: fmt.Sprintf(format, args...)}
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil, nil // git archive's commit comment; carries no file
	}
	f.entries++
	if f.limits.MaxEntries > 0 && f.entries > f.limits.MaxEntries {
		return nil, fmt.Errorf("more than %d entries: %w", f.limits.MaxEntries, ErrTooLarge)
	}
	name, err := cleanName(raw)
	// Before any other refusal, which would quote the name. The cleaned
	// name too: cleaning can join what "//" or "./" split.
	if ContainsAny(raw, f.redact) || ContainsAny(hdr.Linkname, f.redact) || (err == nil && ContainsAny(name, f.redact)) {
		if target, ok := f.inherited[name]; err != nil || !ok || target != hdr.Linkname {
			return nil, fmt.Errorf("tar entry #%d: %w", f.entries, ErrSecretName)
		}
	}
	if err != nil {
		return refuse("%v", err)
	}
	if name == "." {
		if hdr.Typeflag != tar.TypeDir {
			return refuse("workspace root must be a directory")
		}
		return nil, nil // /workspace itself keeps the mode the tmpfs gave it
	}
	if seen[name] {
		return refuse("duplicate entry")
	}
	seen[name] = true
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return refuse("sparse file")
		}
	}
	// Refuse writing through a symlink placed earlier (in this or an
	// earlier layer): tar would follow it.
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if f.symlinks[dir] {
			return refuse("path goes through symlink %q", dir)
		}
	}
	out := &tar.Header{
		Name:    name,
		Mode:    hdr.Mode & 0o777,
		ModTime: hdr.ModTime,
		Format:  tar.FormatGNU,
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeRegA:
		if hdr.Size < 0 {
			return refuse("negative size")
		}
		f.bytes += hdr.Size
		if f.bytes > f.limits.MaxBytes {
			return nil, fmt.Errorf("content larger than %d bytes at %q: %w", f.limits.MaxBytes, raw, ErrTooLarge)
		}
		out.Typeflag, out.Size = tar.TypeReg, hdr.Size
		delete(f.symlinks, name)
	case tar.TypeDir:
		if f.symlinks[name] {
			return refuse("directory replaces symlink")
		}
		out.Typeflag, out.Name, out.Mode = tar.TypeDir, name+"/", out.Mode|0o700
	case tar.TypeSymlink:
		if err := exechost.CheckSymlink(name, hdr.Linkname); err != nil {
			return refuse("%v", err)
		}
		out.Typeflag, out.Linkname, out.Mode = tar.TypeSymlink, hdr.Linkname, 0o777
		f.symlinks[name] = true
	case tar.TypeLink:
		return refuse("hard link to %q", hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock:
		return refuse("device node")
	case tar.TypeFifo:
		return refuse("FIFO")
	case tar.TypeGNUSparse:
		return refuse("sparse file")
	default:
		return refuse("unsupported type %q", hdr.Typeflag)
	}
	if f.names != nil {
		f.names[name] = out.Linkname
	}
	return out, nil
}

// cleanName turns a tar name into a clean relative path, refusing anything
// absolute or containing "..". Checked on the raw components: a name like
// "a/../../x" is refused, not cleaned into something harmless-looking.
func cleanName(raw string) (string, error) {
	switch {
	case raw == "":
		return "", errors.New("empty name")
	case !utf8.ValidString(raw) || strings.IndexByte(raw, 0) >= 0:
		return "", errors.New("name not UTF-8 or contains NUL")
	case len(raw) > maxNameBytes:
		return "", fmt.Errorf("name longer than %d bytes", maxNameBytes)
	case strings.HasPrefix(raw, "/"):
		return "", errors.New("absolute path")
	}
	for _, c := range strings.Split(raw, "/") {
		if c == ".." {
			return "", errors.New("path contains ..")
		}
		if len(c) > maxComponentBytes {
			return "", fmt.Errorf("path component longer than %d bytes", maxComponentBytes)
		}
	}
	return path.Clean(raw), nil
}

// BoundedReader reads at most n bytes and then fails with ErrTooLarge
// instead of pretending the stream ended (unlike io.LimitReader).
type BoundedReader struct {
	r io.Reader
	n int64
}

// NewBoundedReader bounds r to n bytes.
func NewBoundedReader(r io.Reader, n int64) *BoundedReader { return &BoundedReader{r: r, n: n} }

func (b *BoundedReader) Read(p []byte) (int, error) {
	if b.n <= 0 {
		// One more byte available means the bound is really exceeded.
		var one [1]byte
		if _, err := io.ReadFull(b.r, one[:]); err != nil {
			return 0, err
		}
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	return n, err
}
