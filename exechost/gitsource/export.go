package gitsource

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// Entry is one path of a revision's tree.
type Entry struct {
	Path string
	// Kind: "file", "exec" (100755), "symlink" (120000) or "submodule"
	// (160000: exported as an empty directory, as a checkout without
	// submodule init leaves it; the submodule's content is never fetched).
	Kind string
	OID  string
	Size int64 // blob bytes (0 for submodules)
}

// Tree is a resolved revision, listed and checked against the budget, ready
// to be streamed. Nothing of it is in a sandbox yet.
type Tree struct {
	Repository string
	Commit     string
	Time       time.Time // committer time: the mtime of every entry
	Entries    []Entry
	Bytes      int64 // sum of blob sizes

	im   *Importer
	repo *repository
}

// Prepare checks src (revision grammar, repository path and layout), resolves
// the revision to a commit and lists its tree, refusing it when it has more
// than the configured entries, more than maxBytes of blobs, or an entry no
// workspace may hold. It runs before any sandbox exists, so a refusal costs
// no container.
func (im *Importer) Prepare(ctx context.Context, src exechost.GitSource, maxBytes int64) (*Tree, error) {
	if err := exechost.CheckRevision(src.Revision); err != nil {
		return nil, refuse(fieldRev, "%v", err)
	}
	repo, err := im.checkRepo(src.RepositoryPath)
	if err != nil {
		return nil, err
	}
	if im.git == "" {
		return nil, errors.New("git import: git is not installed on this worker")
	}
	ctx, cancel := context.WithTimeout(ctx, im.timeout)
	defer cancel()
	dir, err := privateGitDir(repo)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := im.readFormat(ctx, repo, dir); err != nil {
		return nil, err
	}
	if err := writeConfig(dir, repo); err != nil {
		return nil, fmt.Errorf("git import: %w", err)
	}

	out, err := im.output(ctx, dir, 256, "rev-parse", "--verify", "--quiet", "--end-of-options", src.Revision+"^{commit}")
	var ge *gitError
	if errors.As(err, &ge) && ge.exitCode() == 1 {
		return nil, &NotFoundError{What: "revision", Name: src.Revision, Repo: repo.path}
	}
	if err != nil {
		return nil, im.timeoutErr(ctx, fmt.Errorf("git revision %q in %s: %w", src.Revision, repo.path, err))
	}
	commit := strings.TrimSpace(string(out))
	if (len(commit) != 40 && len(commit) != 64) || !isHex(commit) {
		return nil, fmt.Errorf("git rev-parse %q in %s: unexpected output %q", src.Revision, repo.path, commit)
	}
	t := &Tree{Repository: repo.path, Commit: commit, im: im, repo: repo}
	raw, err := im.headOf(ctx, dir, commit)
	if err != nil {
		return nil, im.timeoutErr(ctx, fmt.Errorf("git commit %s in %s: %w", commit, repo.path, err))
	}
	t.Time = parseCommitTime(raw)
	if err := im.list(ctx, dir, t, maxBytes); err != nil {
		return nil, im.timeoutErr(ctx, err)
	}
	return t, nil
}

// timeoutErr names the budget when the import's own timeout ended git.
func (im *Importer) timeoutErr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		var pe *exechost.PolicyError
		if !errors.As(err, &pe) {
			return refuse(fieldTree, "git ran longer than the import budget (%s, or the step's deadline): %v", im.timeout, err)
		}
	}
	return err
}

// headOf returns the start (at most 64 KiB, enough for the header) of a raw
// commit object.
func (im *Importer) headOf(ctx context.Context, dir, commit string) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd, stderr := im.command(ctx, dir, "cat-file", "commit", commit)
	out := &boundedBuffer{max: 64 << 10, onOverflow: cancel}
	cmd.Stdout = out
	if err := cmd.Run(); err != nil && !out.truncated {
		return nil, &gitError{op: "cat-file", err: err, stderr: stderr.String()}
	}
	return out.Bytes(), nil
}

// list runs git ls-tree and checks every entry and the budget while it
// streams, stopping git at the first entry past a limit.
func (im *Importer) list(ctx context.Context, dir string, t *Tree, maxBytes int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd, stderr := im.command(ctx, dir, "ls-tree", "-r", "-z", "-l", "--full-tree", "--end-of-options", t.Commit)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("git ls-tree: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git ls-tree: %w", err)
	}
	perr := t.parse(bufio.NewReaderSize(stdout, 64<<10), im.maxEntries, maxBytes)
	if perr != nil {
		cancel()
	}
	werr := cmd.Wait()
	if perr != nil {
		return perr
	}
	if werr != nil {
		return fmt.Errorf("list %s in %s: %w", t.Commit, t.Repository, &gitError{op: "ls-tree", err: werr, stderr: stderr.String()})
	}
	return t.checkPaths()
}

// parse reads `<mode> SP <type> SP <oid> SP+ <size> TAB <path> NUL` records.
func (t *Tree) parse(r *bufio.Reader, maxEntries int, maxBytes int64) error {
	for {
		rec, err := r.ReadSlice(0)
		if errors.Is(err, io.EOF) && len(rec) == 0 {
			return nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return refuse(fieldTree, "a tree entry's path is longer than %d bytes", maxPathLen)
		}
		if err != nil {
			return fmt.Errorf("git ls-tree: %w", err)
		}
		rec = bytes.TrimSuffix(rec, []byte{0})
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		f := strings.Fields(string(meta))
		if !ok || len(f) != 4 {
			return fmt.Errorf("git ls-tree: malformed entry %q", truncate(string(rec)))
		}
		if len(t.Entries) >= maxEntries {
			return refuse(fieldTree, "revision %s has more than %d entries (the worker's git import budget)", t.Commit, maxEntries)
		}
		e := Entry{Path: string(p), OID: f[2]}
		switch {
		case f[1] == "blob" && (f[0] == "100644" || f[0] == "100664"):
			e.Kind = "file"
		case f[1] == "blob" && f[0] == "100755":
			e.Kind = "exec"
		case f[1] == "blob" && f[0] == "120000":
			e.Kind = "symlink"
		case f[1] == "commit" && f[0] == "160000":
			e.Kind = "submodule"
		default:
			return refuse(fieldTree, "entry %q has unsupported mode %s %s", truncate(e.Path), f[0], f[1])
		}
		if e.Kind != "submodule" {
			n, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("git ls-tree: bad size %q for %q", f[3], truncate(e.Path))
			}
			e.Size = n
			t.Bytes += n
			if t.Bytes > maxBytes {
				return refuse(fieldTree, "revision %s has more than %d bytes of files (the step's disk limit)", t.Commit, maxBytes)
			}
		}
		if err := checkPath(e.Path); err != nil {
			return refuse(fieldTree, "entry %q: %v", truncate(e.Path), err)
		}
		t.Entries = append(t.Entries, e)
	}
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// checkPath accepts a relative path of clean, non-special components.
func checkPath(p string) error {
	if p == "" || len(p) > maxPathLen {
		return fmt.Errorf("empty or longer than %d bytes", maxPathLen)
	}
	if path.Clean(p) != p || strings.HasPrefix(p, "/") {
		return errors.New("not a clean relative path")
	}
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "." || c == "..":
			return errors.New("has a . or .. component")
		case strings.EqualFold(c, ".git"):
			return errors.New("has a .git component")
		case len(c) > maxNameLen:
			return fmt.Errorf("a component is longer than %d bytes", maxNameLen)
		}
	}
	return nil
}

// checkPaths refuses a crafted tree whose entries collide: a path listed
// twice, or a path below a file, symlink or submodule.
func (t *Tree) checkPaths() error {
	leaves := make(map[string]bool, len(t.Entries))
	for _, e := range t.Entries {
		if leaves[e.Path] {
			return refuse(fieldTree, "entry %q appears twice", truncate(e.Path))
		}
		leaves[e.Path] = true
	}
	for _, e := range t.Entries {
		for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
			if leaves[d] {
				return refuse(fieldTree, "entry %q is below the non-directory %q", truncate(e.Path), truncate(d))
			}
		}
	}
	return nil
}

// Open streams the tree as a tar archive: parent directories (0755), files
// (0644 or 0755) with exactly their blob bytes, symlinks, and an empty
// directory per submodule, in ls-tree order. The objects are read with git
// cat-file --batch; each must be the blob listed, of the listed size. A
// failure surfaces as the reader's error, never as a short stream; Close
// stops git and removes the private git directory.
func (t *Tree) Open(ctx context.Context) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, t.im.timeout)
	dir, err := privateGitDir(t.repo)
	if err != nil {
		cancel()
		return nil, err
	}
	cmd, stderr := t.im.command(ctx, dir, "cat-file", "--batch")
	stdin, err := cmd.StdinPipe()
	if err == nil {
		var stdout io.ReadCloser
		if stdout, err = cmd.StdoutPipe(); err == nil {
			if err = cmd.Start(); err == nil {
				pr, pw := io.Pipe()
				s := &stream{pr: pr, cancel: cancel, dir: dir, done: make(chan struct{})}
				go func() {
					defer stdin.Close()
					w := bufio.NewWriter(stdin)
					for _, e := range t.Entries {
						if e.Kind != "submodule" {
							if _, err := w.WriteString(e.OID + "\n"); err != nil {
								return
							}
						}
					}
					w.Flush()
				}()
				go func() {
					defer close(s.done)
					err := t.write(pw, bufio.NewReaderSize(stdout, 64<<10))
					if err != nil {
						cancel()
					}
					werr := cmd.Wait()
					if err == nil && werr != nil {
						err = &gitError{op: "cat-file", err: werr, stderr: stderr.String()}
					}
					if err != nil {
						err = t.im.timeoutErr(ctx, fmt.Errorf("git import of %s: %w", t.Commit, err))
					}
					pw.CloseWithError(err)
				}()
				return s, nil
			}
		}
	}
	cancel()
	os.RemoveAll(dir)
	return nil, fmt.Errorf("git cat-file: %w", err)
}

// stream is Open's reader.
type stream struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
	dir    string
	done   chan struct{}
	once   sync.Once
}

func (s *stream) Read(p []byte) (int, error) { return s.pr.Read(p) }

func (s *stream) Close() error {
	s.once.Do(func() {
		s.pr.CloseWithError(errors.New("git import closed"))
		s.cancel()
		<-s.done
		os.RemoveAll(s.dir)
	})
	return nil
}

// write turns cat-file's answers into the tar stream.
func (t *Tree) write(w io.Writer, r *bufio.Reader) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	hdr := func(name string, typ byte, mode int64, size int64, link string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: size, Linkname: link,
			ModTime: t.Time, Format: tar.FormatPAX}
	}
	mkdirs := func(p string) error {
		var parents []string
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			dirs[parents[i]] = true
			if err := tw.WriteHeader(hdr(parents[i]+"/", tar.TypeDir, 0o755, 0, "")); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range t.Entries {
		if err := mkdirs(e.Path); err != nil {
			return err
		}
		if e.Kind == "submodule" {
			dirs[e.Path] = true
			if err := tw.WriteHeader(hdr(e.Path+"/", tar.TypeDir, 0o755, 0, "")); err != nil {
				return err
			}
			continue
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("cat-file: %w", err)
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != e.OID || f[1] != "blob" || f[2] != strconv.FormatInt(e.Size, 10) {
			return fmt.Errorf("cat-file: object %s of %q: got %q, want a blob of %d bytes", e.OID, truncate(e.Path), truncate(strings.TrimSpace(line)), e.Size)
		}
		switch e.Kind {
		case "symlink":
			if e.Size > exechost.MaxLinkTargetBytes {
				return refuse(fieldTree, "symlink %q: target longer than %d bytes", truncate(e.Path), exechost.MaxLinkTargetBytes)
			}
			target := make([]byte, e.Size)
			if _, err := io.ReadFull(r, target); err != nil {
				return fmt.Errorf("cat-file: %w", err)
			}
			// The one workspace symlink rule (chains included), shared
			// with checkpoints; the Docker host's filter applies it again.
			if err := exechost.CheckSymlink(e.Path, string(target)); err != nil {
				return refuse(fieldTree, "symlink %q: %v", truncate(e.Path), err)
			}
			if err := tw.WriteHeader(hdr(e.Path, tar.TypeSymlink, 0o777, 0, string(target))); err != nil {
				return err
			}
		default:
			mode := int64(0o644)
			if e.Kind == "exec" {
				mode = 0o755
			}
			if err := tw.WriteHeader(hdr(e.Path, tar.TypeReg, mode, e.Size, "")); err != nil {
				return err
			}
			if _, err := io.CopyN(tw, r, e.Size); err != nil {
				return fmt.Errorf("cat-file: %s: %w", truncate(e.Path), err)
			}
		}
		if b, err := r.ReadByte(); err != nil || b != '\n' {
			return fmt.Errorf("cat-file: object %s not terminated", e.OID)
		}
	}
	return tw.Close()
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}
