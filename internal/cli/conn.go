package cli

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentflow/agentflow/internal/temporalconn"
)

// AnnotationConnection on an engine verb says which Temporal it talks to
// when not a cluster: ConnectionNone (no server at all) or ConnectionLocal
// (a server the verb starts itself, so no profile is read: its address
// is where that server listens). Unset: a cluster, from flags, the
// environment and a profile (temporalconn.Load).
const AnnotationConnection = "agentflow/connection"

// Values of AnnotationConnection.
const (
	ConnectionNone  = "none"
	ConnectionLocal = "local"
)

// connFlags are the global connection flags as given. Their defaults are
// the built-in ones; only flags set on the command line enter the flags'
// layer, so the environment and a profile show through the others.
type connFlags struct {
	fs                      *pflag.FlagSet
	address, namespace      string
	tls                     bool
	ca, cert, key           string
	serverName              string
	disableHostVerification bool
	apiKey                  string
	profile, configFile     string
	disableConfigFile       bool
}

func (f *connFlags) register(pf *pflag.FlagSet) {
	f.fs = pf
	pf.StringVar(&f.address, "address", temporalconn.DefaultAddress,
		"Temporal frontend address (env "+temporalconn.EnvAddress+"; profile address)")
	pf.StringVar(&f.namespace, "namespace", temporalconn.DefaultNamespace,
		"Temporal namespace (env "+temporalconn.EnvNamespace+"; profile namespace)")
	pf.StringVar(&f.profile, "profile", "",
		`profile of the Temporal config file to connect with (env `+temporalconn.EnvProfile+`; default "default", if the file has it)`)
	pf.StringVar(&f.configFile, "config-file", "",
		"Temporal config file (TOML, shared with the temporal CLI and SDKs) the profile is read from (env "+temporalconn.EnvConfigFile+"; default $HOME/.config/temporalio/temporal.toml, or the OS's user config directory)")
	pf.BoolVar(&f.disableConfigFile, "disable-config-file", false, "read no profile: flags, variables and defaults only")
	pf.BoolVar(&f.tls, "tls", false,
		"connect to Temporal with TLS (implied by the other --tls-* flags and --api-key; --tls=false turns it off; env "+temporalconn.EnvTLS+"; profile tls)")
	pf.StringVar(&f.ca, "tls-ca", "",
		"PEM file of the CAs that verify the Temporal server (default: system roots; env "+temporalconn.EnvTLSCA+"; profile tls.server_ca_cert_path)")
	pf.StringVar(&f.cert, "tls-cert", "",
		"client certificate (PEM) for mutual TLS, with --tls-key (env "+temporalconn.EnvTLSCert+"; profile tls.client_cert_path)")
	pf.StringVar(&f.key, "tls-key", "",
		"client key (PEM) for mutual TLS (env "+temporalconn.EnvTLSKey+"; profile tls.client_key_path)")
	pf.StringVar(&f.serverName, "tls-server-name", "",
		"name to verify in the server's certificate, when the address is not it (env "+temporalconn.EnvTLSServerName+"; profile tls.server_name)")
	pf.BoolVar(&f.disableHostVerification, "tls-disable-host-verification", false,
		"accept any server certificate: for tests only (env "+temporalconn.EnvTLSDisableHostVerify+"; profile tls.disable_host_verification)")
	// No variable is ever a flag default: help would print the key.
	pf.StringVar(&f.apiKey, "api-key", "",
		"API key sent as a bearer token, e.g. Temporal Cloud; implies TLS (prefer env "+temporalconn.EnvAPIKey+" or a profile's api_key: arguments are visible to other users)")
}

// layer is the flags the user gave.
func (f *connFlags) layer() temporalconn.Layer {
	var l temporalconn.Layer
	set := func(name string) bool { return f.fs.Changed(name) }
	if set("address") {
		l.Address = f.address
	}
	if set("namespace") {
		l.Namespace = f.namespace
	}
	if set("tls") {
		l.TLS = &f.tls
	}
	l.CA.File, l.Cert.File, l.Key.File = f.ca, f.cert, f.key
	l.ServerName = f.serverName
	if set("tls-disable-host-verification") {
		l.DisableHostVerification = &f.disableHostVerification
	}
	l.APIKey = f.apiKey
	return l
}

// resolve fills o's connection settings for cmd (temporalconn.Load), by
// what the verb's AnnotationConnection says. Commands outside the engine
// verbs (validate, graph, help, completion) talk to no server and read
// nothing.
func (f *connFlags) resolve(cmd *cobra.Command, o *Options) error {
	mode, engineVerb := connectionMode(cmd)
	if !engineVerb || mode == ConnectionNone {
		return nil
	}
	src := temporalconn.Sources{
		Flags:     f.layer(),
		Profile:   temporalconn.ProfileRef{File: f.configFile, Name: f.profile},
		NoProfile: f.disableConfigFile,
		Environ:   os.Environ(),
	}
	if mode == ConnectionLocal {
		if f.profile != "" || f.configFile != "" {
			return UsageErr("%s starts its own server: --profile and --config-file do not apply", cmd.Name())
		}
		src.NoProfile = true
	}
	s, err := temporalconn.Load(src)
	if err != nil {
		return UsageErr("%v", err)
	}
	o.Address, o.Namespace, o.Security = s.Address, s.Namespace, s.Security
	return nil
}

// connectionMode is the AnnotationConnection of cmd's engine verb, and
// whether cmd is (under) an engine verb at all.
func connectionMode(cmd *cobra.Command) (string, bool) {
	for c := cmd; c != nil; c = c.Parent() {
		if c.HasParent() && !c.Parent().HasParent() {
			return c.Annotations[AnnotationConnection], isEngineVerb(c.Name())
		}
	}
	return "", false
}
