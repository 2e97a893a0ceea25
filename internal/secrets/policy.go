package secrets

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// ErrNotAllowed: the source is well-formed but this worker's operator did
// not allow it (or no operator may: /proc, /sys, /dev, worker settings).
// It is a policy refusal: the activity fails the step non-retryably.
var ErrNotAllowed = errors.New("secret source not allowed")

// Source is one parsed secret source. Exactly one of the forms is set,
// by Scheme:
//
//	env://NAME          Scheme "env",   Name
//	file:///abs/path    Scheme "file",  Path (absolute, clean, no "..")
//	vault://a/b/key     Scheme "vault", Path "a/b", Key "key"
type Source struct {
	Scheme string
	Name   string
	Path   string
	Key    string
	raw    string
}

func (s Source) String() string { return s.raw }

var (
	envNameRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	vaultPathRe = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)+$`)
)

// ParseSource is the one parser of secret sources; the spec validator and
// the worker both use it. It checks the form only: whether a worker may
// resolve the source is Policy's business (and Forbidden's, for what no
// worker may resolve). Error messages name the source, which is spec text,
// never a value.
func ParseSource(src string) (Source, error) {
	scheme, rest, ok := strings.Cut(src, "://")
	if !ok {
		return Source{}, fmt.Errorf("%w %q: want env://VAR, file:///abs/path or vault://path/key", ErrInvalidSource, src)
	}
	s := Source{Scheme: scheme, raw: src}
	switch scheme {
	case "env":
		if !envNameRe.MatchString(rest) {
			return Source{}, fmt.Errorf("%w %q: env://VAR needs a variable name", ErrInvalidSource, src)
		}
		s.Name = rest
	case "file":
		// The rest is taken literally: no URL decoding (%2e%2e stays four
		// characters, never ".."), no host part.
		if !strings.HasPrefix(rest, "/") || rest == "/" || strings.ContainsRune(rest, 0) {
			return Source{}, fmt.Errorf("%w %q: want file:///absolute/path", ErrInvalidSource, src)
		}
		for seg := range strings.SplitSeq(rest, "/") {
			if seg == ".." {
				return Source{}, fmt.Errorf("%w %q: the path must not contain ..", ErrInvalidSource, src)
			}
		}
		s.Path = filepath.Clean(rest)
	case "vault":
		if !vaultPathRe.MatchString(rest) {
			return Source{}, fmt.Errorf("%w %q: want vault://path/key", ErrInvalidSource, src)
		}
		for seg := range strings.SplitSeq(rest, "/") {
			if seg == "." || seg == ".." {
				return Source{}, fmt.Errorf("%w %q: the path must not contain . or ..", ErrInvalidSource, src)
			}
		}
		if err := checkVaultForm(rest); err != nil {
			return Source{}, fmt.Errorf("%w %q: %v", ErrInvalidSource, src, err)
		}
		i := strings.LastIndex(rest, "/")
		s.Path, s.Key = rest[:i], rest[i+1:]
	default:
		return Source{}, fmt.Errorf("%w %q: scheme %q is not supported (env://, file:// or vault://)", ErrInvalidSource, src, scheme)
	}
	return s, nil
}

// Worker settings: environment variables that configure the worker, its
// clients or its host. They are never secret sources, whatever
// --secret-env-allow says, and the spec validator refuses them. The list
// is documented in docs/security/secrets.md; keep the two in step.
var (
	workerSettingPrefixes = []string{
		"AGENTFLOW_", // this worker's own settings
		"TEMPORAL_",  // Temporal address, namespace, TLS cert and key, API key
		"VAULT_",     // the Vault client's token, address, role
		"AWS_",       // cloud credentials of the worker's identity
		"AZURE_",
		"GOOGLE_",
		"GCP_",
		"CLOUDSDK_",
		"DOCKER_", // the daemon socket, TLS material
		"CONTAINERD_",
		"KUBERNETES_", // in-cluster service discovery
		"KUBE",        // KUBECONFIG and friends
		"LD_",         // the dynamic loader
		"SSH_",        // the agent socket
		"GIT_",        // git's own configuration (GIT_CONFIG_*, GIT_SSH_COMMAND, ...)
		"OTEL_",
		"SUDO_",
	}
	workerSettingNames = map[string]bool{
		"HOME": true, "PATH": true, "USER": true, "LOGNAME": true, "SHELL": true,
		"PWD": true, "OLDPWD": true, "HOSTNAME": true, "TMPDIR": true, "TERM": true,
		"LANG": true, "MAIL": true, "IFS": true, "ENV": true, "BASH_ENV": true,
		"HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true, "ALL_PROXY": true,
		"http_proxy": true, "https_proxy": true, "no_proxy": true, "all_proxy": true,
		"SSL_CERT_FILE": true, "SSL_CERT_DIR": true,
		"GOPATH": true, "GOROOT": true, "GOFLAGS": true, "GODEBUG": true,
		"NOTIFY_SOCKET": true, "INVOCATION_ID": true, "JOURNAL_STREAM": true,
		"XDG_RUNTIME_DIR": true, "XDG_CONFIG_HOME": true, "DBUS_SESSION_BUS_ADDRESS": true,
	}
)

// WorkerSetting reports whether the env var name is a worker setting that
// no secret may read (matched case-insensitively on the prefixes).
func WorkerSetting(name string) bool {
	if workerSettingNames[name] || workerSettingNames[strings.ToUpper(name)] {
		return true
	}
	up := strings.ToUpper(name)
	for _, p := range workerSettingPrefixes {
		if strings.HasPrefix(up, p) {
			return true
		}
	}
	return false
}

// forbiddenRoots: kernel interfaces and devices. /proc/self/environ is the
// worker's environment, /proc/<pid>/... every other process's; nothing
// under them is a secret file.
var forbiddenRoots = []string{"/proc", "/sys", "/dev"}

func underForbidden(p string) (string, bool) {
	for _, r := range forbiddenRoots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return r, true
		}
	}
	return "", false
}

// containsForbidden reports whether dir is an ancestor of a forbidden root
// ("/" contains /proc).
func containsForbidden(dir string) (string, bool) {
	for _, r := range forbiddenRoots {
		if dir == "/" || strings.HasPrefix(r, dir+"/") {
			return r, true
		}
	}
	return "", false
}

// Forbidden reports the refusal that holds on every worker whatever its
// policy: env:// of a worker setting, file:// under /proc, /sys or /dev.
// nil when the source may be allowed by an operator.
func Forbidden(s Source) error {
	switch s.Scheme {
	case "env":
		if WorkerSetting(s.Name) {
			return fmt.Errorf("%w: %s: %s is a worker setting, never a secret source (docs/security/secrets.md)", ErrNotAllowed, s.raw, s.Name)
		}
	case "file":
		if r, bad := underForbidden(s.Path); bad {
			return fmt.Errorf("%w: %s: nothing under %s is ever a secret source", ErrNotAllowed, s.raw, r)
		}
	}
	return nil
}

// Policy is the operator's allow-list of secret sources. The zero Policy
// allows nothing: a spec author is not a worker operator, and the worker's
// environment and filesystem are the operator's.
type Policy struct {
	// EnvAllow: glob patterns (path.Match) on variable names
	// (worker --secret-env-allow).
	EnvAllow []string
	// FileRoots: directories whose regular files may be read
	// (worker --secret-file-root). A path is resolved inside its root:
	// symlinks may not leave it.
	FileRoots []string
	// VaultPrefixes: vault paths allowed, by whole segments, checked on
	// where a source points (VaultRef), never on its spelling. A prefix is
	// mapped like a source: "prod/slack" is path prod/slack of the worker's
	// KV mount and allows vault://prod/slack/webhook,
	// vault://prod/slack/x/key and vault://secret/data/prod/slack/webhook,
	// not vault://prod/slackers/key; "kv/data/team" is path team of mount
	// kv; "kv/data" all of mount kv (worker --secret-vault-prefix).
	VaultPrefixes []string
}

// Flags naming each allow-list in errors.
const (
	FlagEnvAllow    = "--secret-env-allow"
	FlagFileRoot    = "--secret-file-root"
	FlagVaultPrefix = "--secret-vault-prefix"
)

// Check validates the policy itself, for the worker to refuse to start on a
// bad one: patterns must compile, roots must be absolute existing
// directories outside (and not containing) /proc, /sys, /dev after symlinks
// are resolved, prefixes must be vault paths.
func (p Policy) Check() error {
	var errs []error
	for _, pat := range p.EnvAllow {
		if _, err := path.Match(pat, "X"); err != nil || pat == "" {
			errs = append(errs, fmt.Errorf("%s %q: not a glob pattern on variable names", FlagEnvAllow, pat))
		}
	}
	for _, root := range p.FileRoots {
		if _, err := resolveRoot(root); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pre := range p.VaultPrefixes {
		if _, err := cleanVaultPrefix(pre); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Summary describes the policy for the worker's start-up log line.
func (p Policy) Summary() map[string][]string {
	c := func(s []string) []string { out := append([]string(nil), s...); sort.Strings(out); return out }
	return map[string][]string{"env_allow": c(p.EnvAllow), "file_roots": c(p.FileRoots), "vault_prefixes": c(p.VaultPrefixes)}
}

func resolveRoot(root string) (string, error) {
	if !filepath.IsAbs(root) {
		return "", fmt.Errorf("%s %q: want an absolute directory", FlagFileRoot, root)
	}
	clean := filepath.Clean(root)
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return "", fmt.Errorf("%s %q: %v", FlagFileRoot, root, err)
	}
	for _, d := range []string{clean, real} {
		if r, bad := underForbidden(d); bad {
			return "", fmt.Errorf("%s %q: nothing under %s is ever a secret source", FlagFileRoot, root, r)
		}
		if r, bad := containsForbidden(d); bad {
			return "", fmt.Errorf("%s %q: the root contains %s; name a directory that holds only secrets", FlagFileRoot, root, r)
		}
	}
	if ok, err := isDir(real); err != nil || !ok {
		return "", fmt.Errorf("%s %q: not a directory", FlagFileRoot, root)
	}
	return real, nil
}

func cleanVaultPrefix(pre string) (string, error) {
	p := strings.Trim(pre, "/")
	ok := p != ""
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." || !vaultPathRe.MatchString("x/"+seg) {
			ok = false
		}
	}
	if !ok {
		return "", fmt.Errorf("%s %q: want a vault path such as prod/slack", FlagVaultPrefix, pre)
	}
	return p, nil
}

// allowEnv: the name matches an allow pattern (worker settings were
// refused before by Forbidden).
func (p Policy) allowEnv(s Source) error {
	for _, pat := range p.EnvAllow {
		if ok, _ := path.Match(pat, s.Name); ok {
			return nil
		}
	}
	return fmt.Errorf("%w: %s: this worker does not allow environment variable %s (the operator allows names with %s PATTERN)", ErrNotAllowed, s.raw, s.Name, FlagEnvAllow)
}

// fileRoot returns the root (resolved) holding s.Path and the path
// relative to it.
func (p Policy) fileRoot(s Source) (root, rel string, err error) {
	for _, r := range p.FileRoots {
		real, rerr := resolveRoot(r)
		if rerr != nil {
			continue
		}
		for _, base := range []string{filepath.Clean(r), real} {
			if rel, ok := strings.CutPrefix(s.Path, base+"/"); ok && rel != "" {
				return real, rel, nil
			}
		}
	}
	return "", "", fmt.Errorf("%w: %s: the file is not under a secret root of this worker (the operator allows directories with %s DIR)", ErrNotAllowed, s.raw, FlagFileRoot)
}

// allowVault: the secret ref (s mapped with the worker's KV mount) is
// under a prefix mapped the same way.
func (p Policy) allowVault(s Source, ref VaultRef, mount string) error {
	for _, pre := range p.VaultPrefixes {
		c, err := cleanVaultPrefix(pre)
		if err != nil {
			continue
		}
		if mapVaultPrefix(c, mount).covers(ref) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s: vault secret %s/data/%s is not under a prefix this worker allows (the operator allows prefixes with %s PREFIX)", ErrNotAllowed, s.raw, ref.Mount, ref.Path, FlagVaultPrefix)
}

func isDir(p string) (bool, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}
