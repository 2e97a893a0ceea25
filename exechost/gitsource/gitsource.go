// Package gitsource imports one revision of a local git repository as a
// workspace tar stream, for every ExecutionHost (the Docker host and the
// Fake both use it). It reads raw objects (git ls-tree + git cat-file
// --batch), never git archive or a checkout, so the workspace is exactly the
// revision's blobs with their modes: no filters, attributes, export-subst or
// export-ignore can run or rewrite anything. git runs with an empty
// environment over a private git directory that links the repository's
// objects and refs but not its configuration, so nothing the repository
// configures (filters, hooks, fsmonitor, promisor remotes, includes) is
// read, let alone executed. Repositories must lie under operator-configured
// roots, reached without symlinks. See docs/security/git-import.md.
package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/exechost"
)

// Defaults of Config.
const (
	DefaultMaxEntries = 100_000
	DefaultTimeout    = 2 * time.Minute
	// maxRefEntries bounds the walk of a repository's refs directory.
	maxRefEntries = 100_000
	// maxPathLen and maxNameLen bound one workspace path (Linux limits).
	maxPathLen = 4095
	maxNameLen = 255
)

// Config is the operator's part: where repositories may live and what git
// may cost on the worker.
type Config struct {
	// Roots are the directories repositories must lie under (worker
	// --git-root). Each must be an absolute path with no symlink in it.
	// None: every git import is refused.
	Roots []string
	// MaxEntries bounds the files of one revision (default 100 000).
	MaxEntries int
	// Timeout bounds the wall time of each git phase of one import (resolve
	// and list; stream), on top of the caller's context (default 2 min).
	Timeout time.Duration
}

// Importer imports git revisions under Config's rules. Safe for concurrent use.
type Importer struct {
	roots      []string
	maxEntries int
	timeout    time.Duration
	git        string
}

// New checks cfg. A missing git binary is reported by Prepare, not here, so
// a worker without git still serves steps that do not import one.
func New(cfg Config) (*Importer, error) {
	im := &Importer{maxEntries: cfg.MaxEntries, timeout: cfg.Timeout}
	if im.maxEntries <= 0 {
		im.maxEntries = DefaultMaxEntries
	}
	if im.timeout <= 0 {
		im.timeout = DefaultTimeout
	}
	for _, r := range cfg.Roots {
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("git root %q: want an absolute path", r)
		}
		c := filepath.Clean(r)
		real, err := filepath.EvalSymlinks(c)
		if err != nil {
			return nil, fmt.Errorf("git root %s: %w", r, err)
		}
		if real != c {
			return nil, fmt.Errorf("git root %s: goes through a symlink (resolves to %s); give the real path", r, real)
		}
		if st, err := os.Stat(c); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("git root %s: not a directory", r)
		}
		im.roots = append(im.roots, c)
	}
	for _, p := range []string{"/usr/bin/git", "/bin/git"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			im.git = p
			break
		}
	}
	if im.git == "" {
		if p, err := exec.LookPath("git"); err == nil {
			im.git = p
		}
	}
	return im, nil
}

// Roots are the configured roots.
func (im *Importer) Roots() []string { return append([]string(nil), im.roots...) }

// NotFoundError is a repository or revision that does not exist. It matches
// exechost.ErrNotFound and, because a retry cannot make it appear,
// exechost.ErrPolicy (so the engine fails the step non-retryably).
type NotFoundError struct {
	What string // "repository" or "revision"
	Name string
	Repo string
}

func (e *NotFoundError) Error() string {
	if e.What == "repository" {
		return fmt.Sprintf("git repository %s: %v", e.Repo, exechost.ErrNotFound)
	}
	return fmt.Sprintf("git revision %q in %s: %v", e.Name, e.Repo, exechost.ErrNotFound)
}

func (e *NotFoundError) Is(target error) bool {
	return target == exechost.ErrNotFound || target == exechost.ErrPolicy
}

func refuse(field, format string, args ...any) error {
	return &exechost.PolicyError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

const (
	fieldRepo = "workspace.git.repository"
	fieldRev  = "workspace.git.revision"
	fieldTree = "workspace.git"
)

// repository is a checked repository: the git directory whose objects and
// refs are linked into the private git directory.
type repository struct {
	path   string // as requested
	gitDir string // path/.git, or path for a bare repository
	format string // object format: "sha1" or "sha256"
	repoV  string // core.repositoryformatversion
	hasPR  bool   // packed-refs exists
	hasSh  bool   // shallow exists
}

// checkRepo applies the path rules: clean absolute path, under a root, no
// symlink anywhere on it, a plain git directory (no gitfile, no linked
// worktree, no alternates, no symlinks among its top-level parts).
func (im *Importer) checkRepo(p string) (*repository, error) {
	if len(im.roots) == 0 {
		return nil, refuse(fieldRepo, "git import is disabled on this worker: the operator configured no repository root (worker --git-root DIR)")
	}
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return nil, refuse(fieldRepo, "%q: want a clean absolute path", p)
	}
	under := false
	for _, r := range im.roots {
		if p == r || strings.HasPrefix(p, r+string(filepath.Separator)) || r == "/" {
			under = true
			break
		}
	}
	if !under {
		return nil, refuse(fieldRepo, "%s is not under a repository root of this worker (%s)", p, strings.Join(im.roots, ", "))
	}
	// Walk every component with lstat: no symlink anywhere on the path.
	cur := "/"
	for _, comp := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if comp == "" {
			continue
		}
		cur = filepath.Join(cur, comp)
		st, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &NotFoundError{What: "repository", Repo: p}
		}
		if err != nil {
			return nil, fmt.Errorf("git repository %s: %w", p, err)
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return nil, refuse(fieldRepo, "%s: %s is a symlink; repositories are reached without symlinks", p, cur)
		}
		if !st.IsDir() {
			return nil, refuse(fieldRepo, "%s: %s is not a directory", p, cur)
		}
	}
	repo := &repository{path: p, gitDir: filepath.Join(p, ".git"), format: "sha1", repoV: "0"}
	st, err := os.Lstat(repo.gitDir)
	switch {
	case err == nil && st.IsDir():
	case err == nil:
		return nil, refuse(fieldRepo, "%s: .git is not a directory (gitfiles of linked worktrees and submodules, and symlinks, are not supported)", p)
	case errors.Is(err, fs.ErrNotExist):
		repo.gitDir = p // a bare repository, if it has the parts below
	default:
		return nil, fmt.Errorf("git repository %s: %w", p, err)
	}
	kinds := []struct {
		name     string
		dir      bool
		optional bool
	}{
		{"HEAD", false, false}, {"objects", true, false}, {"refs", true, false},
		{"packed-refs", false, true}, {"config", false, true}, {"shallow", false, true},
		{"objects/info", true, true}, {"objects/pack", true, true},
	}
	for _, k := range kinds {
		st, err := os.Lstat(filepath.Join(repo.gitDir, k.name))
		if errors.Is(err, fs.ErrNotExist) {
			if k.optional {
				continue
			}
			return nil, &NotFoundError{What: "repository", Repo: p}
		}
		if err != nil {
			return nil, fmt.Errorf("git repository %s: %w", p, err)
		}
		if st.Mode()&fs.ModeSymlink != 0 || st.IsDir() != k.dir || (!k.dir && !st.Mode().IsRegular()) {
			return nil, refuse(fieldRepo, "%s: %s is a symlink or of the wrong type", p, k.name)
		}
		switch k.name {
		case "packed-refs":
			repo.hasPR = true
		case "shallow":
			repo.hasSh = true
		}
	}
	for _, name := range []string{"commondir", "objects/info/alternates", "objects/info/http-alternates"} {
		if _, err := os.Lstat(filepath.Join(repo.gitDir, name)); err == nil {
			return nil, refuse(fieldRepo, "%s: %s is not supported (objects or refs would come from outside the repository)", p, name)
		}
	}
	// Refs are followed by path: none may be a symlink leading elsewhere.
	n := 0
	err = filepath.WalkDir(filepath.Join(repo.gitDir, "refs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > maxRefEntries {
			return refuse(fieldRepo, "%s: more than %d refs", p, maxRefEntries)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return refuse(fieldRepo, "%s: ref %s is a symlink", p, strings.TrimPrefix(path, repo.gitDir+"/"))
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return refuse(fieldRepo, "%s: ref %s is not a regular file", p, strings.TrimPrefix(path, repo.gitDir+"/"))
		}
		return nil
	})
	if err != nil {
		var pe *exechost.PolicyError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, fmt.Errorf("git repository %s: refs: %w", p, err)
	}
	return repo, nil
}

// readFormat reads the two settings the private git directory needs from
// the repository's configuration, with git's own parser, without includes.
// Nothing else of that configuration is ever used.
func (im *Importer) readFormat(ctx context.Context, repo *repository, scratch string) error {
	repo.format, repo.repoV = "sha1", "0"
	cfg := filepath.Join(repo.gitDir, "config")
	if _, err := os.Lstat(cfg); err != nil {
		return nil
	}
	out, err := im.output(ctx, scratch, 1<<20, "config", "--file", cfg, "--no-includes", "-z", "--get-regexp",
		`^(core\.repositoryformatversion|extensions\..*)$`)
	var ge *gitError
	if errors.As(err, &ge) && ge.exitCode() == 1 {
		return nil // none of those keys
	}
	if err != nil {
		return fmt.Errorf("git repository %s: read config: %w", repo.path, err)
	}
	for _, kv := range strings.Split(string(out), "\x00") {
		k, v, _ := strings.Cut(kv, "\n")
		v = strings.ToLower(strings.TrimSpace(v))
		switch strings.ToLower(k) {
		case "core.repositoryformatversion":
			if v != "0" && v != "1" {
				return refuse(fieldRepo, "%s: repository format version %q is not supported", repo.path, v)
			}
			repo.repoV = v
		case "extensions.objectformat":
			if v != "sha1" && v != "sha256" {
				return refuse(fieldRepo, "%s: object format %q is not supported", repo.path, v)
			}
			repo.format = v
		case "extensions.refstorage":
			if v != "files" {
				return refuse(fieldRepo, "%s: ref storage %q is not supported", repo.path, v)
			}
		}
	}
	return nil
}

// privateGitDir makes a git directory of our own whose objects and refs are
// the repository's (symlinks to the checked directories) and whose config
// holds only the format: git then reads no repository configuration at all.
// The caller removes it.
func privateGitDir(repo *repository) (string, error) {
	dir, err := os.MkdirTemp("", "agentflow-git-")
	if err != nil {
		return "", fmt.Errorf("git import: %w", err)
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(dir)
		return "", fmt.Errorf("git import: %w", err)
	}
	head, err := readSmall(filepath.Join(repo.gitDir, "HEAD"), 4096)
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), head, 0o600); err != nil {
		return fail(err)
	}
	links := []string{"objects", "refs"}
	if repo.hasPR {
		links = append(links, "packed-refs")
	}
	if repo.hasSh {
		links = append(links, "shallow")
	}
	for _, l := range links {
		if err := os.Symlink(filepath.Join(repo.gitDir, l), filepath.Join(dir, l)); err != nil {
			return fail(err)
		}
	}
	if err := writeConfig(dir, repo); err != nil {
		return fail(err)
	}
	return dir, nil
}

// writeConfig writes the private git directory's whole configuration.
func writeConfig(dir string, repo *repository) error {
	cfg := "[core]\n\trepositoryformatversion = " + repo.repoV + "\n\tbare = true\n"
	if repo.format != "sha1" {
		cfg += "[extensions]\n\tobjectformat = " + repo.format + "\n"
	}
	return os.WriteFile(filepath.Join(dir, "config"), []byte(cfg), 0o600)
}

func readSmall(name string, max int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, max+1)
	n, err := f.Read(b)
	if err != nil {
		return nil, err
	}
	if int64(n) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, max)
	}
	return b[:n], nil
}

// parseCommitTime reads the committer time of a raw commit object.
func parseCommitTime(raw []byte) time.Time {
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" {
			break // end of the header
		}
		if rest, ok := strings.CutPrefix(line, "committer "); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				if s, err := strconv.ParseInt(f[len(f)-2], 10, 64); err == nil {
					return time.Unix(s, 0).UTC()
				}
			}
		}
	}
	return time.Unix(0, 0).UTC()
}
