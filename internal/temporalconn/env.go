package temporalconn

import (
	"fmt"
	"strconv"
	"strings"
)

// Environment names, as the Temporal CLI and SDKs spell them (the
// "environment configuration" of the Temporal docs).
const (
	EnvAddress              = "TEMPORAL_ADDRESS"
	EnvNamespace            = "TEMPORAL_NAMESPACE"
	EnvTLS                  = "TEMPORAL_TLS"
	EnvTLSCA                = "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
	EnvTLSCAData            = "TEMPORAL_TLS_SERVER_CA_CERT_DATA"
	EnvTLSCert              = "TEMPORAL_TLS_CLIENT_CERT_PATH"
	EnvTLSCertData          = "TEMPORAL_TLS_CLIENT_CERT_DATA"
	EnvTLSKey               = "TEMPORAL_TLS_CLIENT_KEY_PATH"
	EnvTLSKeyData           = "TEMPORAL_TLS_CLIENT_KEY_DATA"
	EnvTLSServerName        = "TEMPORAL_TLS_SERVER_NAME"
	EnvTLSDisableHostVerify = "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"
	EnvAPIKey               = "TEMPORAL_API_KEY"
	// EnvGRPCMetaPrefix + NAME is a gRPC header sent with every request
	// (NAME lower-cased, "_" → "-"); an empty value removes a profile's.
	EnvGRPCMetaPrefix = "TEMPORAL_GRPC_META_"
	// EnvConfigFile and EnvProfile choose the profile (profile.go).
	EnvConfigFile = "TEMPORAL_CONFIG_FILE"
	EnvProfile    = "TEMPORAL_PROFILE"
)

// envAliases are older names still read when the current one is unset:
// the Temporal CLI's legacy names first, then the ones agentflow read
// before it followed the CLI's current names (DECISIONS 228).
var envAliases = map[string][]string{
	EnvTLSCA:       {"TEMPORAL_TLS_CA", "TEMPORAL_TLS_CA_PATH"},
	EnvTLSCAData:   {"TEMPORAL_TLS_CA_DATA"},
	EnvTLSCert:     {"TEMPORAL_TLS_CERT", "TEMPORAL_TLS_CERT_PATH"},
	EnvTLSCertData: {"TEMPORAL_TLS_CERT_DATA"},
	EnvTLSKey:      {"TEMPORAL_TLS_KEY", "TEMPORAL_TLS_KEY_PATH"},
	EnvTLSKeyData:  {"TEMPORAL_TLS_KEY_DATA"},
}

// env is a process environment as a map; an empty value counts as unset,
// as for every agentflow variable.
type env map[string]string

func parseEnviron(environ []string) env {
	e := env{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			e[k] = v
		}
	}
	return e
}

// get returns the value of name or, unset, of its first set alias, with
// the name it came from.
func (e env) get(name string) (value, from string) {
	for _, n := range append([]string{name}, envAliases[name]...) {
		if v := e[n]; v != "" {
			return v, n
		}
	}
	return "", name
}

func (e env) bool(name string) (*bool, error) {
	v, from := e.get(name)
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: want true or false", from, v)
	}
	return &b, nil
}

// material reads a file-or-data pair: both set is an error naming both.
func (e env) material(fileName, dataName string) (Material, error) {
	file, fromFile := e.get(fileName)
	data, fromData := e.get(dataName)
	if file != "" && data != "" {
		return Material{}, fmt.Errorf("%s and %s: set one, not both", fromFile, fromData)
	}
	return Material{File: file, Data: data}, nil
}

// FromEnv is the environment's layer (environ as os.Environ returns it):
// the Temporal CLI's variables. An unparsable boolean, a file and inline
// data for the same certificate, or a bad header name is an error naming
// the variable.
func FromEnv(environ []string) (Layer, error) {
	e := parseEnviron(environ)
	l := Layer{Source: "environment"}
	var err error
	l.Address, _ = e.get(EnvAddress)
	l.Namespace, _ = e.get(EnvNamespace)
	if l.TLS, err = e.bool(EnvTLS); err != nil {
		return Layer{}, err
	}
	if l.DisableHostVerification, err = e.bool(EnvTLSDisableHostVerify); err != nil {
		return Layer{}, err
	}
	if l.CA, err = e.material(EnvTLSCA, EnvTLSCAData); err != nil {
		return Layer{}, err
	}
	if l.Cert, err = e.material(EnvTLSCert, EnvTLSCertData); err != nil {
		return Layer{}, err
	}
	if l.Key, err = e.material(EnvTLSKey, EnvTLSKeyData); err != nil {
		return Layer{}, err
	}
	l.ServerName, _ = e.get(EnvTLSServerName)
	l.APIKey, _ = e.get(EnvAPIKey)
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		name, ok := strings.CutPrefix(k, EnvGRPCMetaPrefix)
		if !ok {
			continue
		}
		key := NormalizeHeader(name)
		if err := checkHeader(key, v); err != nil {
			return Layer{}, fmt.Errorf("%s: %w", k, err)
		}
		if l.Headers == nil {
			l.Headers = map[string]string{}
		}
		// Kept even when empty: an empty variable removes the header a
		// profile sets (as in the SDK).
		l.Headers[key] = v
	}
	return l, nil
}
