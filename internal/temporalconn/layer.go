package temporalconn

import (
	"fmt"
	"strings"
)

// Built-in defaults, below every layer (SPEC §6).
const (
	DefaultAddress   = "127.0.0.1:7233"
	DefaultNamespace = "default"
)

// Material is a PEM certificate or key: a file, or the PEM inline (the
// *_DATA variables, a profile's *_data keys). At most one is set.
type Material struct {
	File string
	Data string
}

func (m Material) set() bool { return m.File != "" || m.Data != "" }

// Layer is one source of connection settings: the flags a user gave, the
// environment, a profile. Empty strings and nil pointers are unset, so a
// lower layer can fill them.
type Layer struct {
	// Source names the layer in messages ("flags", "environment",
	// `profile "prod" in FILE`).
	Source    string
	Address   string
	Namespace string
	// TLS: explicitly on or off; nil leaves it to the other fields.
	TLS                     *bool
	CA, Cert, Key           Material
	ServerName              string
	DisableHostVerification *bool
	APIKey                  string
	// Headers: gRPC metadata sent with every request, keys normalised
	// (NormalizeHeader). In the environment's layer an empty value
	// removes the header of a lower layer.
	Headers map[string]string
}

// saysTLS reports whether the layer says anything about TLS: a switch, a
// TLS field, or an API key (which needs TLS).
func (l Layer) saysTLS() bool {
	return l.TLS != nil || l.CA.set() || l.Cert.set() || l.Key.set() || l.ServerName != "" ||
		l.DisableHostVerification != nil || l.APIKey != ""
}

// Settings are the resolved connection settings of one client.
type Settings struct {
	Address   string
	Namespace string
	Security  Security
}

// Resolve merges layers, the highest precedence first (flags,
// environment, profile: DECISIONS 227). Each setting comes from the first
// layer that sets it, else the built-in default. Whether TLS is on is
// decided by the first layer that says anything about TLS: its switch, or
// on when it only sets TLS fields or an API key. Off wins over the TLS
// fields of lower layers (they are dropped), but an API key is never sent
// in clear: a key with TLS off is an error naming both sources.
func Resolve(layers ...Layer) (Settings, error) {
	s := Settings{Address: DefaultAddress, Namespace: DefaultNamespace}
	first := func(get func(Layer) string) (string, string) {
		for _, l := range layers {
			if v := get(l); v != "" {
				return v, l.Source
			}
		}
		return "", ""
	}
	if v, _ := first(func(l Layer) string { return l.Address }); v != "" {
		s.Address = v
	}
	if v, _ := first(func(l Layer) string { return l.Namespace }); v != "" {
		s.Namespace = v
	}
	material := func(get func(Layer) Material) Material {
		for _, l := range layers {
			if m := get(l); m.set() {
				return m
			}
		}
		return Material{}
	}
	sec := &s.Security
	ca := material(func(l Layer) Material { return l.CA })
	cert := material(func(l Layer) Material { return l.Cert })
	key := material(func(l Layer) Material { return l.Key })
	sec.CAFile, sec.CAData = ca.File, ca.Data
	sec.CertFile, sec.CertData = cert.File, cert.Data
	sec.KeyFile, sec.KeyData = key.File, key.Data
	sec.ServerName, _ = first(func(l Layer) string { return l.ServerName })
	for _, l := range layers {
		if l.DisableHostVerification != nil {
			sec.DisableHostVerification = *l.DisableHostVerification
			break
		}
	}
	var keyFrom string
	sec.APIKey, keyFrom = first(func(l Layer) string { return l.APIKey })
	// Headers: lowest layer first, so higher ones override or remove.
	for i := len(layers) - 1; i >= 0; i-- {
		for k, v := range layers[i].Headers {
			if sec.Headers == nil {
				sec.Headers = map[string]string{}
			}
			if v == "" {
				delete(sec.Headers, k)
				continue
			}
			sec.Headers[k] = v
		}
	}
	if len(sec.Headers) == 0 {
		sec.Headers = nil
	}
	for _, l := range layers {
		if !l.saysTLS() {
			continue
		}
		if l.TLS == nil || *l.TLS {
			sec.TLS = true
			break
		}
		// Off: plaintext, whatever TLS fields lower layers (or this one,
		// as in the SDK) carry.
		if sec.APIKey != "" {
			return Settings{}, fmt.Errorf("TLS is off (%s) but an API key is set (%s): a key sent in clear is a key given away; turn TLS on or drop the key", l.Source, keyFrom)
		}
		*sec = Security{Headers: sec.Headers}
		break
	}
	if err := sec.Check(); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// NormalizeHeader is the Temporal SDK's gRPC metadata key form: lower
// case, "_" → "-", so a variable name can carry any header.
func NormalizeHeader(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "_", "-"))
}

// checkHeader refuses what gRPC would refuse at the first call, or worse,
// send: a key outside gRPC's metadata alphabet, a reserved "grpc-" key, a
// value with a control character.
func checkHeader(key, value string) error {
	if key == "" {
		return fmt.Errorf("empty header name")
	}
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("header name %q: want letters, digits, '-', '_', '.'", key)
		}
	}
	if strings.HasPrefix(key, "grpc-") {
		return fmt.Errorf("header name %q: grpc- names are reserved", key)
	}
	for _, r := range value {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("header %q: the value contains a control character", key)
		}
	}
	return nil
}

// Sources are what Load reads: the flags the user gave, which profile,
// the process environment.
type Sources struct {
	// Flags holds only the flags given on the command line (a flag left
	// at its default is unset, so the environment and the profile show).
	Flags   Layer
	Profile ProfileRef
	// NoProfile skips the config file (--disable-config-file; a command
	// that talks to a server it starts itself).
	NoProfile bool
	Environ   []string
}

// Load is the one resolution every verb and the worker use: flags, then
// the environment, then the profile, then the built-in defaults.
func Load(s Sources) (Settings, error) {
	s.Flags.Source = "flags"
	env, err := FromEnv(s.Environ)
	if err != nil {
		return Settings{}, err
	}
	var prof Layer
	if !s.NoProfile {
		if prof, err = LoadProfile(s.Profile, s.Environ); err != nil {
			return Settings{}, err
		}
	}
	return Resolve(s.Flags, env, prof)
}
