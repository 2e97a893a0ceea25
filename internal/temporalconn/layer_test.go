package temporalconn

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		want    Layer
		err     string
	}{
		{name: "nothing", environ: []string{"HOME=/root"}, want: Layer{}},
		{
			name: "the Temporal CLI's names",
			environ: []string{EnvAddress + "=t:7233", EnvNamespace + "=ns", EnvTLS + "=true", EnvTLSCA + "=/ca.pem",
				EnvTLSCert + "=/c.pem", EnvTLSKey + "=/k.pem", EnvTLSServerName + "=temporal.internal",
				EnvTLSDisableHostVerify + "=false", EnvAPIKey + "=key-1"},
			want: Layer{Address: "t:7233", Namespace: "ns", TLS: ptr(true), CA: Material{File: "/ca.pem"},
				Cert: Material{File: "/c.pem"}, Key: Material{File: "/k.pem"}, ServerName: "temporal.internal",
				DisableHostVerification: ptr(false), APIKey: "key-1"},
		},
		{
			name:    "inline PEM",
			environ: []string{EnvTLSCAData + "=CA", EnvTLSCertData + "=CERT", EnvTLSKeyData + "=KEY"},
			want:    Layer{CA: Material{Data: "CA"}, Cert: Material{Data: "CERT"}, Key: Material{Data: "KEY"}},
		},
		{
			name:    "the CLI's legacy names and agentflow's earlier ones",
			environ: []string{"TEMPORAL_TLS_CA=/legacy-ca.pem", "TEMPORAL_TLS_CERT_PATH=/old-c.pem", "TEMPORAL_TLS_KEY_PATH=/old-k.pem"},
			want:    Layer{CA: Material{File: "/legacy-ca.pem"}, Cert: Material{File: "/old-c.pem"}, Key: Material{File: "/old-k.pem"}},
		},
		{
			name:    "the current name beats an alias",
			environ: []string{"TEMPORAL_TLS_CA_PATH=/old.pem", EnvTLSCA + "=/new.pem"},
			want:    Layer{CA: Material{File: "/new.pem"}},
		},
		{
			name:    "empty is unset",
			environ: []string{EnvAddress + "=", EnvTLS + "=", EnvAPIKey + "="},
			want:    Layer{},
		},
		{
			name:    "gRPC headers, names normalised; empty kept (it removes a profile's)",
			environ: []string{EnvGRPCMetaPrefix + "X_Team=blue", EnvGRPCMetaPrefix + "TRACE_ID="},
			want:    Layer{Headers: map[string]string{"x-team": "blue", "trace-id": ""}},
		},
		{name: "a bad boolean", environ: []string{EnvTLSDisableHostVerify + "=yes please"}, err: EnvTLSDisableHostVerify},
		{name: "file and inline", environ: []string{EnvTLSCert + "=/c.pem", "TEMPORAL_TLS_CERT_DATA=x"}, err: EnvTLSCert + " and TEMPORAL_TLS_CERT_DATA"},
		{name: "a reserved header", environ: []string{EnvGRPCMetaPrefix + "GRPC_TIMEOUT=1"}, err: "reserved"},
		{name: "a header value with a line break", environ: []string{EnvGRPCMetaPrefix + "X=a\nb"}, err: "control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromEnv(tc.environ)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			tc.want.Source = "environment"
			require.Equal(t, tc.want, got)
		})
	}
}

// TestResolvePrecedence: every setting, flag > environment > profile >
// default; TLS on or off by the highest layer that says anything about it.
func TestResolvePrecedence(t *testing.T) {
	flags := func(l Layer) Layer { l.Source = "flags"; return l }
	env := func(l Layer) Layer { l.Source = "environment"; return l }
	prof := func(l Layer) Layer { l.Source = `profile "p" in f.toml`; return l }
	def := func(s Security) Settings {
		return Settings{Address: DefaultAddress, Namespace: DefaultNamespace, Security: s}
	}
	tlsOn := func(s Security) Settings { s.TLS = true; return def(s) }
	for _, tc := range []struct {
		name             string
		flags, env, prof Layer
		want             Settings
		err              string
		errAlso          string
	}{
		{name: "defaults", want: def(Security{})},

		{name: "address: profile", prof: prof(Layer{Address: "p:1"}), want: Settings{Address: "p:1", Namespace: DefaultNamespace}},
		{name: "address: env beats profile", env: env(Layer{Address: "e:1"}), prof: prof(Layer{Address: "p:1"}),
			want: Settings{Address: "e:1", Namespace: DefaultNamespace}},
		{name: "address: flag beats env", flags: flags(Layer{Address: "f:1"}), env: env(Layer{Address: "e:1"}), prof: prof(Layer{Address: "p:1"}),
			want: Settings{Address: "f:1", Namespace: DefaultNamespace}},

		{name: "namespace: profile", prof: prof(Layer{Namespace: "p"}), want: Settings{Address: DefaultAddress, Namespace: "p"}},
		{name: "namespace: env beats profile", env: env(Layer{Namespace: "e"}), prof: prof(Layer{Namespace: "p"}),
			want: Settings{Address: DefaultAddress, Namespace: "e"}},
		{name: "namespace: flag beats env", flags: flags(Layer{Namespace: "f"}), env: env(Layer{Namespace: "e"}), prof: prof(Layer{Namespace: "p"}),
			want: Settings{Address: DefaultAddress, Namespace: "f"}},

		{name: "CA: profile, implies TLS", prof: prof(Layer{CA: Material{File: "p.pem"}}), want: tlsOn(Security{CAFile: "p.pem"})},
		{name: "CA: env beats profile", env: env(Layer{CA: Material{File: "e.pem"}}), prof: prof(Layer{CA: Material{File: "p.pem"}}),
			want: tlsOn(Security{CAFile: "e.pem"})},
		{name: "CA: flag beats env", flags: flags(Layer{CA: Material{File: "f.pem"}}), env: env(Layer{CA: Material{File: "e.pem"}}),
			want: tlsOn(Security{CAFile: "f.pem"})},
		{name: "CA: inline env beats a profile's file (one setting, two forms)", env: env(Layer{CA: Material{Data: "PEM"}}),
			prof: prof(Layer{CA: Material{File: "p.pem"}}), want: tlsOn(Security{CAData: "PEM"})},

		{name: "client cert: profile", prof: prof(Layer{Cert: Material{File: "pc"}, Key: Material{File: "pk"}}),
			want: tlsOn(Security{CertFile: "pc", KeyFile: "pk"})},
		{name: "client cert: env beats profile", env: env(Layer{Cert: Material{File: "ec"}, Key: Material{File: "ek"}}),
			prof: prof(Layer{Cert: Material{File: "pc"}, Key: Material{File: "pk"}}), want: tlsOn(Security{CertFile: "ec", KeyFile: "ek"})},
		{name: "client cert: flags beat env", flags: flags(Layer{Cert: Material{File: "fc"}, Key: Material{File: "fk"}}),
			env: env(Layer{Cert: Material{File: "ec"}, Key: Material{File: "ek"}}), want: tlsOn(Security{CertFile: "fc", KeyFile: "fk"})},
		{name: "client key: each setting on its own", flags: flags(Layer{Key: Material{File: "fk"}}),
			prof: prof(Layer{Cert: Material{File: "pc"}, Key: Material{Data: "PK"}}), want: tlsOn(Security{CertFile: "pc", KeyFile: "fk"})},
		{name: "half a pair across layers is still half", flags: flags(Layer{Cert: Material{File: "fc"}}), err: "go together"},

		{name: "server name: profile", prof: prof(Layer{ServerName: "p"}), want: tlsOn(Security{ServerName: "p"})},
		{name: "server name: env beats profile", env: env(Layer{ServerName: "e"}), prof: prof(Layer{ServerName: "p"}), want: tlsOn(Security{ServerName: "e"})},
		{name: "server name: flag beats env", flags: flags(Layer{ServerName: "f"}), env: env(Layer{ServerName: "e"}), want: tlsOn(Security{ServerName: "f"})},

		{name: "host verification: profile", prof: prof(Layer{DisableHostVerification: ptr(true)}), want: tlsOn(Security{DisableHostVerification: true})},
		{name: "host verification: env false beats profile true", env: env(Layer{DisableHostVerification: ptr(false)}),
			prof: prof(Layer{DisableHostVerification: ptr(true), CA: Material{File: "p.pem"}}), want: tlsOn(Security{CAFile: "p.pem"})},
		{name: "host verification: flag beats env", flags: flags(Layer{DisableHostVerification: ptr(true)}), env: env(Layer{DisableHostVerification: ptr(false)}),
			want: tlsOn(Security{DisableHostVerification: true})},

		{name: "API key: profile, implies TLS", prof: prof(Layer{APIKey: "p"}), want: tlsOn(Security{APIKey: "p"})},
		{name: "API key: env beats profile", env: env(Layer{APIKey: "e"}), prof: prof(Layer{APIKey: "p"}), want: tlsOn(Security{APIKey: "e"})},
		{name: "API key: flag beats env", flags: flags(Layer{APIKey: "f"}), env: env(Layer{APIKey: "e"}), want: tlsOn(Security{APIKey: "f"})},

		{name: "TLS: a profile's empty tls table turns it on", prof: prof(Layer{TLS: ptr(true)}), want: tlsOn(Security{})},
		{name: "TLS: a profile's disabled drops its own fields (as in the SDK)", prof: prof(Layer{TLS: ptr(false), CA: Material{File: "p.pem"}}),
			want: def(Security{})},
		{name: "TLS: env off beats a profile's TLS", env: env(Layer{TLS: ptr(false)}),
			prof: prof(Layer{CA: Material{File: "p.pem"}, Cert: Material{File: "pc"}, Key: Material{File: "pk"}}), want: def(Security{})},
		{name: "TLS: flag off beats env TLS", flags: flags(Layer{TLS: ptr(false)}), env: env(Layer{CA: Material{File: "e.pem"}}), want: def(Security{})},
		{name: "TLS: an env CA beats a profile's off", env: env(Layer{CA: Material{File: "e.pem"}}), prof: prof(Layer{TLS: ptr(false)}),
			want: tlsOn(Security{CAFile: "e.pem"})},
		{name: "TLS: flag on beats env off", flags: flags(Layer{TLS: ptr(true)}), env: env(Layer{TLS: ptr(false)}), want: tlsOn(Security{})},
		{name: "TLS: env on beats a profile's off", env: env(Layer{TLS: ptr(true)}), prof: prof(Layer{TLS: ptr(false)}), want: tlsOn(Security{})},
		{name: "TLS off with a profile's API key", flags: flags(Layer{TLS: ptr(false)}), prof: prof(Layer{APIKey: "p"}),
			err: "TLS is off (flags)", errAlso: `API key is set (profile "p" in f.toml)`},
		{name: "a profile's API key with its own tls disabled", prof: prof(Layer{TLS: ptr(false), APIKey: "p"}), err: "in clear"},

		{name: "headers: profile", prof: prof(Layer{Headers: map[string]string{"x-team": "p", "x-org": "o"}}),
			want: def(Security{Headers: map[string]string{"x-team": "p", "x-org": "o"}})},
		{name: "headers: env overrides one, removes another", env: env(Layer{Headers: map[string]string{"x-team": "e", "x-org": ""}}),
			prof: prof(Layer{Headers: map[string]string{"x-team": "p", "x-org": "o"}}), want: def(Security{Headers: map[string]string{"x-team": "e"}})},
		{name: "headers: kept when TLS is off", env: env(Layer{TLS: ptr(false)}), prof: prof(Layer{Headers: map[string]string{"x-team": "p"}, CA: Material{File: "p.pem"}}),
			want: def(Security{Headers: map[string]string{"x-team": "p"}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.flags, tc.env, tc.prof)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, tc.errAlso)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
