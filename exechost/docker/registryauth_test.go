package docker

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/registry"
	"github.com/stretchr/testify/require"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func writeConfig(t *testing.T, dir, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o600))
}

// fakeHelper installs docker-credential-<name> on PATH running script
// (sh; the server URL arrives on stdin).
func fakeHelper(t *testing.T, name, script string) {
	t.Helper()
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "docker-credential-"+name), []byte("#!/bin/sh\n"+script+"\n"), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestRegistryCredentials(t *testing.T) {
	tests := []struct {
		name    string
		config  string // "" = no config.json
		helpers map[string]string
		domain  string
		want    registry.AuthConfig // zero = anonymous
		source  string              // substring of the source
		wantErr string
	}{
		{name: "no config file", domain: "127.0.0.1:5000"},
		{name: "no entry for the registry", config: `{"auths":{"other:5000":{"auth":"` + b64("a:b") + `"}}}`, domain: "127.0.0.1:5000"},
		{name: "base64 auth", config: `{"auths":{"127.0.0.1:5000":{"auth":"` + b64("alice:pa:ss") + `"}}}`, domain: "127.0.0.1:5000",
			want: registry.AuthConfig{Username: "alice", Password: "pa:ss"}, source: `auths["127.0.0.1:5000"]`},
		{name: "key with scheme and path", config: `{"auths":{"https://127.0.0.1:5000/v2/":{"username":"bob","password":"pw"}}}`, domain: "127.0.0.1:5000",
			want: registry.AuthConfig{Username: "bob", Password: "pw"}},
		{name: "identity token", config: `{"auths":{"ghcr.io":{"identitytoken":"idtok-9f3a"}}}`, domain: "ghcr.io",
			want: registry.AuthConfig{IdentityToken: "idtok-9f3a"}},
		{name: "docker hub under the index URL", config: `{"auths":{"https://index.docker.io/v1/":{"auth":"` + b64("hub:pw") + `"}}}`, domain: "docker.io",
			want: registry.AuthConfig{Username: "hub", Password: "pw"}},
		{name: "placeholder entry is anonymous", config: `{"auths":{"127.0.0.1:5000":{}}}`, domain: "127.0.0.1:5000"},
		{name: "unknown fields are ignored", config: `{"auths":{},"psFormat":"x","proxies":{"default":{}}}`, domain: "127.0.0.1:5000"},
		{name: "malformed config", config: `{"auths":`, domain: "x", wantErr: "docker config"},
		{name: "auth not base64", config: `{"auths":{"r:1":{"auth":"%%%"}}}`, domain: "r:1", wantErr: "auth is not base64"},
		{name: "auth without colon", config: `{"auths":{"r:1":{"auth":"` + b64("nocolon") + `"}}}`, domain: "r:1", wantErr: "user:password"},
		{name: "registry helper", config: `{"credHelpers":{"r:1":"t1"},"auths":{"r:1":{"auth":"` + b64("file:pw") + `"}}}`, domain: "r:1",
			helpers: map[string]string{"t1": `read s; printf '{"ServerURL":"%s","Username":"u-%s","Secret":"sec"}' "$s" "$s"`},
			want:    registry.AuthConfig{Username: "u-r:1", Password: "sec"}, source: "docker-credential-t1"},
		{name: "helper gets docker hub's index URL", config: `{"credsStore":"t2"}`, domain: "docker.io",
			helpers: map[string]string{"t2": `read s; printf '{"Username":"%s","Secret":"x"}' "$s"`},
			want:    registry.AuthConfig{Username: "https://index.docker.io/v1/", Password: "x"}},
		{name: "helper identity token", config: `{"credsStore":"t3"}`, domain: "r:1",
			helpers: map[string]string{"t3": `printf '{"Username":"<token>","Secret":"idt"}'`},
			want:    registry.AuthConfig{IdentityToken: "idt"}},
		{name: "helper without credentials falls back to auths", config: `{"credsStore":"t4","auths":{"r:1":{"auth":"` + b64("file:pw") + `"}}}`, domain: "r:1",
			helpers: map[string]string{"t4": `echo "credentials not found in native keychain"; exit 1`},
			want:    registry.AuthConfig{Username: "file", Password: "pw"}, source: "auths"},
		{name: "failing helper", config: `{"credsStore":"t5"}`, domain: "r:1",
			helpers: map[string]string{"t5": `echo "keychain locked" >&2; exit 3`}, wantErr: "docker-credential-t5: exit status 3: keychain locked"},
		{name: "malformed helper answer", config: `{"credsStore":"t6"}`, domain: "r:1",
			helpers: map[string]string{"t6": `echo not json`}, wantErr: "malformed answer"},
		{name: "missing helper", config: `{"credsStore":"agentflow-test-absent"}`, domain: "r:1", wantErr: "docker-credential-agentflow-test-absent"},
		{name: "helper name that is a path", config: `{"credsStore":"../../bin/sh"}`, domain: "r:1", wantErr: "not a helper name"},
		{name: "hanging helper", config: `{"credsStore":"t7"}`, domain: "r:1",
			helpers: map[string]string{"t7": `exec sleep 60`}, wantErr: "no answer within"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.config != "" {
				writeConfig(t, dir, tt.config)
			}
			for name, script := range tt.helpers {
				fakeHelper(t, name, script)
			}
			rc := registryCredentials{dir: dir, helperTimeout: 200 * time.Millisecond}
			if tt.name != "hanging helper" {
				rc.helperTimeout = time.Minute // generous: the machine may be loaded
			}
			got, err := rc.lookup(t.Context(), tt.domain)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if tt.want == (registry.AuthConfig{}) {
				require.Empty(t, got.source, "anonymous")
				require.Equal(t, registry.AuthConfig{}, got.auth)
				return
			}
			tt.want.ServerAddress = tt.domain
			require.Equal(t, tt.want, got.auth)
			require.Contains(t, got.source, tt.source)
			for _, secret := range []string{tt.want.Password, tt.want.IdentityToken} {
				if secret != "" {
					require.NotContains(t, got.source, secret, "the source never quotes a secret")
				}
			}
		})
	}
}

func TestRegistryCredentialsWithoutDirAreAnonymous(t *testing.T) {
	got, err := registryCredentials{}.lookup(t.Context(), "127.0.0.1:5000")
	require.NoError(t, err)
	require.Equal(t, credentials{}, got)
}

func TestDefaultDockerConfigDir(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", "/etc/agentflow-docker")
	require.Equal(t, "/etc/agentflow-docker", DefaultDockerConfigDir())
	t.Setenv("DOCKER_CONFIG", "")
	t.Setenv("HOME", "/home/w")
	require.Equal(t, "/home/w/.docker", DefaultDockerConfigDir())
}
