package secrets

import (
	"fmt"
	"strings"
)

// DefaultVaultMount is the KV v2 mount of the short vault:// form when the
// worker names none (worker --vault-kv-mount): Vault's own default.
const DefaultVaultMount = "secret"

// VaultRef is where a vault:// source points in a KV version 2 store: the
// secret at Path inside the engine mounted at Mount, and Key inside that
// secret's data. It is what the operator's allow-list is checked on and
// what a Vault reads, so the two can never disagree about a path.
//
// A vault:// source maps to a VaultRef in one of two forms:
//
//	vault://prod/slack/webhook             short: Mount = the worker's KV mount ("secret"),
//	                                              Path "prod/slack", Key "webhook"
//	vault://secret/data/prod/db/password   explicit: Mount "secret", Path "prod/db", Key "password"
//	                                              (the HTTP API's <mount>/data/<path>, then the key)
//
// A source whose second segment is "data" is always the explicit form (so
// it needs a mount, data, a path and a key); both forms of one secret are
// the same VaultRef.
type VaultRef struct {
	Mount string // KV v2 mount, one segment ("secret")
	Path  string // secret path inside the mount ("prod/slack")
	Key   string // key in the secret's data ("webhook")
}

// String is the HTTP API path of the secret and its key, as errors name it:
// "secret/data/prod/slack#webhook". It holds no value.
func (r VaultRef) String() string { return r.Mount + "/data/" + r.Path + "#" + r.Key }

// explicitData is the segment that marks the explicit form.
const explicitData = "data"

// isExplicit reports whether the segments of a vault path (or prefix)
// start with <mount>/data.
func isExplicit(segs []string) bool { return len(segs) >= 2 && segs[1] == explicitData }

// checkVaultForm is ParseSource's check of the explicit form: mount, data,
// at least one path segment and a key.
func checkVaultForm(rest string) error {
	segs := strings.Split(rest, "/")
	if isExplicit(segs) && len(segs) < 4 {
		return fmt.Errorf("a path whose second segment is %q is the explicit form vault://<mount>/data/<path>/<key> and needs a path and a key", explicitData)
	}
	return nil
}

// VaultRef maps a parsed vault:// source to its KV v2 location; mount is
// the worker's KV mount for the short form ("" → DefaultVaultMount). The
// source must come from ParseSource (segments are then plain names, never
// "." or "..", nothing encoded).
func (s Source) VaultRef(mount string) VaultRef {
	if mount == "" {
		mount = DefaultVaultMount
	}
	segs := strings.Split(s.Path, "/")
	if isExplicit(segs) {
		return VaultRef{Mount: segs[0], Path: strings.Join(segs[2:], "/"), Key: s.Key}
	}
	return VaultRef{Mount: mount, Path: s.Path, Key: s.Key}
}

// vaultPrefix is an allow-list entry mapped like a source: "prod/slack" is
// the worker's KV mount, path prefix prod/slack; "kv/data/prod" is mount kv,
// path prefix prod; "kv/data" is all of mount kv.
type vaultPrefix struct {
	mount string
	path  string // "" = the whole mount
}

func (p vaultPrefix) String() string {
	if p.path == "" {
		return p.mount + "/data/*"
	}
	return p.mount + "/data/" + p.path
}

// mapVaultPrefix maps a cleaned prefix (cleanVaultPrefix) with the
// worker's KV mount.
func mapVaultPrefix(clean, mount string) vaultPrefix {
	if mount == "" {
		mount = DefaultVaultMount
	}
	segs := strings.Split(clean, "/")
	if isExplicit(segs) {
		return vaultPrefix{mount: segs[0], path: strings.Join(segs[2:], "/")}
	}
	return vaultPrefix{mount: mount, path: clean}
}

// covers reports whether the prefix allows the secret at r: same mount,
// and the path equal to the prefix or continuing it by whole segments.
func (p vaultPrefix) covers(r VaultRef) bool {
	if p.mount != r.Mount {
		return false
	}
	return p.path == "" || r.Path == p.path || strings.HasPrefix(r.Path, p.path+"/")
}

// CheckVaultMount validates a KV mount name (worker --vault-kv-mount): one
// path segment of the characters vault:// paths may use.
func CheckVaultMount(mount string) error {
	if mount == "." || mount == ".." || strings.Contains(mount, "/") || !vaultPathRe.MatchString(mount+"/x") {
		return fmt.Errorf("KV mount %q: want one path segment such as secret", mount)
	}
	return nil
}
