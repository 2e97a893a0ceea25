package exechost

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode"
)

// The host-neutral sandbox rules. The spec validator (internal/spec), the
// tool registry (internal/registry), the Validator every host calls and the
// contract kit's Fake all read them from here, so a name or image the spec
// accepts is one every host accepts, and the other way round.

// Resource floors. Below them the sandbox cannot keep sh, sleep and tar
// working (the Docker daemon itself refuses less than 6 MiB of memory and
// 0.01 CPU); a host may raise them, never lower them.
const (
	MinNanoCPUs       = 10_000_000 // 0.01 CPU
	MinMemoryBytes    = 8 << 20
	MinDiskBytes      = 1 << 20
	MinPids           = 8 // the deadline keeper + sh + tar + a tool
	MinMaxOutputBytes = 1
)

// Other bounds of a request.
const (
	MaxEnvBytes      = 64 << 10 // all names and values of one env map
	MaxLabels        = 64
	MaxExecutionID   = 200
	MaxRevisionBytes = 256
	MaxCheckpoints   = 32 // layers of one workspace
)

var (
	// Compiled on first use: every agentctl start (validate must stay fast)
	// would otherwise pay for these at package init.
	envNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	// secretWordRe is matched on the normalised name (see normaliseEnvName).
	secretWordRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|APIKEY|CREDENTIAL|PRIVATEKEY|ACCESSKEY`)
	})
	imageIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })
	// repoRe is the repository part of a reference, as in the distribution
	// reference grammar: an optional registry host[:port]/, then lowercase
	// path components separated by '/'.
	repoRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^([a-zA-Z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)
	})
	digestRe       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })
	checkpointIDRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`) })
	// gpuDeviceRe: an index ("0"), a UUID ("GPU-8d3b…", "MIG-…") or a MIG
	// index ("0:1"), as NVIDIA_VISIBLE_DEVICES takes them; never a ',',
	// which would add a device to the list the runtime is given.
	gpuDeviceRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:._/-]{0,127}$`) })
)

// ValidEnvName reports whether name is a portable environment variable
// name: letters, digits and '_', not starting with a digit.
func ValidEnvName(name string) bool { return envNameRe().MatchString(name) }

// normaliseEnvName upper-cases name and drops every character that is not
// a letter or a digit, so "apiKey", "API_KEY", "api-key" and "Api.Key"
// all read "APIKEY". It is the one normalisation of env names: the spec
// used to drop '_' and '-', the Docker policy only '_'; dropping every
// separator is the stricter union of both.
func normaliseEnvName(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(unicode.ToUpper(r))
		}
	}
	return b.String()
}

// LooksSecret reports whether an environment variable name looks like it
// carries a token, secret, password, API key or credential. Such names are
// refused as plain env: their values travel as secrets.
func LooksSecret(name string) bool { return secretWordRe().MatchString(normaliseEnvName(name)) }

// IsPinned reports whether ref names an immutable image (CheckPinnedImage
// accepts it).
func IsPinned(ref string) bool { return CheckPinnedImage(ref) == nil }

// ErrUnpinnedImage matches a CheckPinnedImage refusal of a well-formed
// mutable reference (a tag or a bare name); a host configured to allow
// mutable references accepts those and nothing else.
var ErrUnpinnedImage = errors.New("image is not digest-pinned")

// CheckPinnedImage accepts only immutable image references:
// "repo@sha256:<64 hex>" (repo in the distribution grammar, optional
// registry host[:port]) or a local image ID "sha256:<64 hex>".
//
// "name:tag@sha256:<hex>" is refused: the daemon ignores the tag, so the
// reference says one thing and runs another; the error says to drop the tag.
// A tag or bare name is refused with an error matching ErrUnpinnedImage.
func CheckPinnedImage(ref string) error {
	if imageIDRe().MatchString(ref) {
		return nil
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if !hasDigest {
		if strings.HasPrefix(ref, "sha256:") {
			return fmt.Errorf("image %q: malformed digest (want sha256:<64 lowercase hex>)", ref)
		}
		return fmt.Errorf("image %q: %w: use repo@sha256:<digest> or a local image ID sha256:<hex>", ref, ErrUnpinnedImage)
	}
	if !digestRe().MatchString(digest) {
		return fmt.Errorf("image %q: malformed digest (want sha256:<64 lowercase hex>)", ref)
	}
	last := name[strings.LastIndexByte(name, '/')+1:]
	if i := strings.IndexByte(last, ':'); i >= 0 {
		tag := last[i+1:]
		return fmt.Errorf("image %q: malformed digest reference: a tag plus a digest is refused (the daemon ignores the tag %q); drop the tag: %s@%s",
			ref, tag, strings.TrimSuffix(name, ":"+tag), digest)
	}
	if !repoRe().MatchString(name) {
		return fmt.Errorf("image %q: malformed digest reference: repository %q is not lowercase path components", ref, name)
	}
	return nil
}

// CheckImageRef checks a reference a host configured to allow mutable
// references may still run: pinned, or a plain tag/name that cannot be read
// as an option.
func CheckImageRef(ref string, allowUnpinned bool) error {
	err := CheckPinnedImage(ref)
	switch {
	case err == nil:
		return nil
	case !allowUnpinned || !errors.Is(err, ErrUnpinnedImage):
		return err
	case ref == "" || strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, " \t\n\r\x00"):
		return fmt.Errorf("image %q is not an image reference", ref)
	}
	return nil
}

// CheckCheckpointID refuses IDs that are unsafe as a file or object name:
// separators, "..", unbounded length.
func CheckCheckpointID(id CheckpointID) error {
	if !checkpointIDRe().MatchString(string(id)) {
		return fmt.Errorf("checkpoint id %q: must match %s", id, checkpointIDRe())
	}
	return nil
}

// CheckGPUDevice checks one GPU device ID of ResourceLimits.GPUDevices:
// an index, a UUID or a MIG device, at most 128 bytes, no separators.
// The runtime's keywords ("all", "none", "void") are not devices.
func CheckGPUDevice(id string) error {
	switch {
	case !gpuDeviceRe().MatchString(id):
		return fmt.Errorf("GPU device %q: want an index or a UUID (letters, digits, ':', '.', '_', '/', '-'; at most 128 bytes)", id)
	case strings.EqualFold(id, "all") || strings.EqualFold(id, "none") || strings.EqualFold(id, "void"):
		return fmt.Errorf("GPU device %q: a keyword of the GPU runtime, not a device", id)
	}
	return nil
}
