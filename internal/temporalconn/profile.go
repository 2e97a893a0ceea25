package temporalconn

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// DefaultProfile is the profile read when none is named.
const DefaultProfile = "default"

// DefaultConfigFile is the Temporal CLI's and SDKs' config file:
// <os.UserConfigDir>/temporalio/temporal.toml ("" without a config dir).
func DefaultConfigFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "temporalio", "temporal.toml")
}

// ProfileRef says which profile to read. File and Name are the flags'
// values ("" when not given); the environment's TEMPORAL_CONFIG_FILE and
// TEMPORAL_PROFILE come next, then the defaults.
type ProfileRef struct {
	File string
	Name string
}

// LoadProfile reads the profile ref names (environ for the variables) as
// a layer. The default file missing, or the default profile missing from
// it, is no profile; a file or a profile that was named (flag or
// variable) and is not there is an error naming it, and so is a malformed
// file (file:line:col: when the parser knows the place). Unknown keys are
// ignored, as the Temporal SDK and CLI do, so a file written for a newer
// CLI still works.
func LoadProfile(ref ProfileRef, environ []string) (Layer, error) {
	e := parseEnviron(environ)
	file, fileFrom := ref.File, "--config-file"
	if file == "" {
		file, fileFrom = e[EnvConfigFile], EnvConfigFile
	}
	if file == "" {
		file, fileFrom = DefaultConfigFile(), ""
	}
	name, nameFrom := ref.Name, "--profile"
	if name == "" {
		name, nameFrom = e[EnvProfile], EnvProfile
	}
	if name == "" {
		name, nameFrom = DefaultProfile, ""
	}
	if file == "" {
		if nameFrom != "" {
			return Layer{}, fmt.Errorf("profile %q (%s): no config file (no user config directory; set %s)", name, nameFrom, EnvConfigFile)
		}
		return Layer{}, nil
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		switch {
		case fileFrom != "":
			return Layer{}, fmt.Errorf("config file %s (%s): no such file", file, fileFrom)
		case nameFrom != "":
			return Layer{}, fmt.Errorf("profile %q (%s): no config file %s", name, nameFrom, file)
		}
		return Layer{}, nil
	}
	if err != nil {
		return Layer{}, fmt.Errorf("config file: %w", err)
	}
	var conf tomlConfig
	if _, err := toml.Decode(string(data), &conf); err != nil {
		return Layer{}, tomlError(file, err)
	}
	p, ok := conf.Profiles[name]
	if !ok {
		if nameFrom != "" {
			return Layer{}, fmt.Errorf("profile %q (%s) is not in %s%s", name, nameFrom, file, conf.names())
		}
		return Layer{}, nil
	}
	l, err := p.layer()
	if err != nil {
		return Layer{}, fmt.Errorf("%s: profile %q: %w", file, name, err)
	}
	l.Source = fmt.Sprintf("profile %q in %s", name, file)
	return l, nil
}

// tomlError puts the file and the parser's place in front of its message.
func tomlError(file string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := pe.Message
		if pe.LastKey != "" && strings.HasPrefix(msg, "want ") {
			msg = pe.LastKey + ": " + msg
		}
		return fmt.Errorf("%s:%d:%d: %s", file, pe.Position.Line, max(pe.Position.Col, 1), msg)
	}
	// Only a value of the wrong kind for a table ends here; its message
	// carries the line.
	return fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "toml: "))
}

// The file's format, as the Temporal SDK's envconfig reads it
// (go.temporal.io/sdk/contrib/envconfig). The codec table is not read:
// agentflow's payload codec is --codec-key-file.
type tomlConfig struct {
	Profiles map[string]tomlProfile `toml:"profile"`
}

type tomlProfile struct {
	Address   tomlString            `toml:"address"`
	Namespace tomlString            `toml:"namespace"`
	APIKey    tomlString            `toml:"api_key"`
	TLS       *tomlTLS              `toml:"tls"`
	GRPCMeta  map[string]tomlString `toml:"grpc_meta"`
}

type tomlTLS struct {
	Disabled                tomlBool   `toml:"disabled"`
	ClientCertPath          tomlString `toml:"client_cert_path"`
	ClientCertData          tomlString `toml:"client_cert_data"`
	ClientKeyPath           tomlString `toml:"client_key_path"`
	ClientKeyData           tomlString `toml:"client_key_data"`
	ServerCACertPath        tomlString `toml:"server_ca_cert_path"`
	ServerCACertData        tomlString `toml:"server_ca_cert_data"`
	ServerName              tomlString `toml:"server_name"`
	DisableHostVerification tomlBool   `toml:"disable_host_verification"`
}

func (c tomlConfig) names() string {
	if len(c.Profiles) == 0 {
		return " (it has no profile)"
	}
	names := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return " (it has " + strings.Join(names, ", ") + ")"
}

func (p tomlProfile) layer() (Layer, error) {
	l := Layer{Address: string(p.Address), Namespace: string(p.Namespace), APIKey: string(p.APIKey)}
	if t := p.TLS; t != nil {
		// A tls table turns TLS on unless it says disabled (as in the SDK).
		on := !bool(t.Disabled)
		l.TLS = &on
		var err error
		if l.CA, err = tomlMaterial("tls.server_ca_cert", t.ServerCACertPath, t.ServerCACertData); err != nil {
			return Layer{}, err
		}
		if l.Cert, err = tomlMaterial("tls.client_cert", t.ClientCertPath, t.ClientCertData); err != nil {
			return Layer{}, err
		}
		if l.Key, err = tomlMaterial("tls.client_key", t.ClientKeyPath, t.ClientKeyData); err != nil {
			return Layer{}, err
		}
		l.ServerName = string(t.ServerName)
		if t.DisableHostVerification {
			v := true
			l.DisableHostVerification = &v
		}
	}
	for k, v := range p.GRPCMeta {
		key := NormalizeHeader(k)
		if err := checkHeader(key, string(v)); err != nil {
			return Layer{}, fmt.Errorf("grpc_meta: %w", err)
		}
		if v == "" {
			continue
		}
		if l.Headers == nil {
			l.Headers = map[string]string{}
		}
		l.Headers[key] = string(v)
	}
	return l, nil
}

func tomlMaterial(key string, path, data tomlString) (Material, error) {
	if path != "" && data != "" {
		return Material{}, fmt.Errorf("%s_path and %s_data: set one, not both", key, key)
	}
	return Material{File: string(path), Data: string(data)}, nil
}

// tomlString and tomlBool decode themselves so that a value of the wrong
// type is a toml.ParseError, which carries its line and column.
type (
	tomlString string
	tomlBool   bool
)

func (s *tomlString) UnmarshalTOML(v any) error {
	str, ok := v.(string)
	if !ok {
		return fmt.Errorf("want a string, not %s", tomlKind(v))
	}
	*s = tomlString(str)
	return nil
}

func (b *tomlBool) UnmarshalTOML(v any) error {
	x, ok := v.(bool)
	if !ok {
		return fmt.Errorf("want true or false, not %s", tomlKind(v))
	}
	*b = tomlBool(x)
	return nil
}

func tomlKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case map[string]any:
		return "a table"
	case []any, []map[string]any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
