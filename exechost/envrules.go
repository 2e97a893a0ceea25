package exechost

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Env names that choose which code runs in the sandbox. A spec author may
// configure a tool, not replace it: these are refused in plain env and in
// secrets alike (defense in depth — the image is pinned, these would let a
// step run other code than the image's tool anyway). Matched on the
// upper-cased name, so "ld_preload" is refused too although the loader
// would ignore it: a harmless lower-case twin is never worth the doubt.
var (
	// codeEnvPrefixes: whole families.
	codeEnvPrefixes = []string{
		"LD_",        // dynamic loader: LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, …
		"DYLD_",      // the macOS loader's equivalents
		"BASH_FUNC_", // exported bash functions (run on any bash start)
		"GIT_",       // GIT_SSH_COMMAND, GIT_EXEC_PATH, GIT_CONFIG_*, …
	}
	// codeEnvNames: single names.
	codeEnvNames = map[string]bool{
		"PATH": true, "GCONV_PATH": true, "LOCPATH": true, "NLSPATH": true, "HOSTALIASES": true,
		// shell start-up and tracing
		"BASH_ENV": true, "ENV": true, "SHELLOPTS": true, "BASHOPTS": true, "PS4": true,
		"PROMPT_COMMAND": true, "IFS": true, "CDPATH": true,
		// runtime injectors
		"PYTHONPATH": true, "PYTHONHOME": true, "PYTHONSTARTUP": true, "PYTHONUSERBASE": true,
		"PYTHONBREAKPOINT": true, "PYTHONEXECUTABLE": true, "PYTHONPLATLIBDIR": true, "PYTHONINSPECT": true,
		"NODE_OPTIONS": true, "NODE_PATH": true, "NODE_REPL_EXTERNAL_MODULE": true,
		"PERL5OPT": true, "PERL5LIB": true, "PERLLIB": true, "PERL5DB": true,
		"RUBYOPT": true, "RUBYLIB": true,
		"JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true, "CLASSPATH": true,
		"LUA_PATH": true, "LUA_CPATH": true, "LUA_INIT": true,
		"PHPRC": true, "PHP_INI_SCAN_DIR": true,
		"DOTNET_STARTUP_HOOKS": true, "DOTNET_ADDITIONAL_DEPS": true,
	}
)

// ChoosesCode reports whether an env name selects which code runs (the
// dynamic loader family, PATH, shell start-up files, runtime injectors such
// as PYTHONPATH or NODE_OPTIONS, git's command hooks).
func ChoosesCode(name string) bool {
	n := strings.ToUpper(name)
	if codeEnvNames[n] {
		return true
	}
	for _, p := range codeEnvPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// ChoosesDevices reports whether an env name tells a GPU container
// runtime which host devices to attach: the NVIDIA container toolkit's
// NVIDIA_* variables (NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES,
// NVIDIA_MIG_CONFIG_DEVICES, …) and AMD_VISIBLE_DEVICES. Where that runtime
// reads the container's environment (the daemon's default runtime is
// nvidia), such a variable would attach GPUs the step did not request, or
// a GPU step's neighbour's: devices come from resources.gpu only.
func ChoosesDevices(name string) bool {
	n := strings.ToUpper(name)
	return strings.HasPrefix(n, "NVIDIA_") || n == "AMD_VISIBLE_DEVICES"
}

// CheckEnvName applies every name rule to a plain env name: syntax, names
// that choose code or devices, names that look like secrets. asSecret
// relaxes only the last (a secret's name may, and usually does, look
// secret).
func CheckEnvName(name string, asSecret bool) error {
	switch {
	case !ValidEnvName(name):
		return fmt.Errorf("invalid name: want letters, digits and '_', not starting with a digit")
	case ChoosesCode(name):
		return fmt.Errorf("%s chooses which code runs (loader, PATH, shell start-up or runtime injection): refused", name)
	case ChoosesDevices(name):
		return fmt.Errorf("%s chooses which host devices the GPU runtime attaches: refused (a step gets GPUs by resources.gpu)", name)
	case !asSecret && LooksSecret(name):
		return fmt.Errorf("name looks like a secret: pass it as a secret, not as plain env")
	}
	return nil
}

// credentialFormats are well-known credential shapes. A plain env value
// containing one is refused: the name check alone misses T0KEN=ghp_….
var credentialFormats = sync.OnceValue(func() []credentialFormat {
	mk := func(kind, re string) credentialFormat { return credentialFormat{kind, regexp.MustCompile(re)} }
	return []credentialFormat{
		mk("AWS access key ID", `\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}\b`),
		mk("GitHub token", `\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}`),
		mk("GitHub token", `\bgithub_pat_[A-Za-z0-9_]{22,}`),
		mk("GitLab token", `\bglpat-[A-Za-z0-9_-]{20,}`),
		mk("Slack token", `\bxox[abprs]-[A-Za-z0-9-]{10,}`),
		mk("private key", `-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`),
		mk("JSON Web Token", `\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`),
		mk("Google API key", `\bAIza[0-9A-Za-z_-]{35}`),
		mk("Stripe key", `\b[rs]k_live_[0-9A-Za-z]{16,}`),
	}
})

type credentialFormat struct {
	kind string
	re   *regexp.Regexp
}

// CredentialKind names the well-known credential format value contains
// (an AWS access key ID, a GitHub/GitLab/Slack token, a private-key PEM
// header, a JWT, a Google API key), or "" when it contains none.
func CredentialKind(value string) string {
	if len(value) < 16 {
		return "" // every format above is longer
	}
	for _, f := range credentialFormats() {
		if f.re.MatchString(value) {
			return f.kind
		}
	}
	return ""
}

// CheckEnvValue refuses a plain env value with a NUL or one that contains a
// well-known credential format. The error never quotes the value.
func CheckEnvValue(value string) error {
	if strings.IndexByte(value, 0) >= 0 {
		return fmt.Errorf("value contains NUL")
	}
	if k := CredentialKind(value); k != "" {
		return fmt.Errorf("value looks like a credential (%s): declare it as a secret instead of plain env", k)
	}
	return nil
}
