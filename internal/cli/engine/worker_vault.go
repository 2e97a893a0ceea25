package engine

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/vaultkv"
	"github.com/agentflow/agentflow/worker"
)

// vaultFlags are the worker's vault:// backends: HashiCorp Vault (KV v2)
// or, for development, a directory.
type vaultFlags struct {
	DevVaultDir      string
	Addr             string
	TokenFile        string
	RoleIDFile       string
	SecretIDFile     string
	Namespace        string
	CACert           string
	KVMount          string
	fs               *pflag.FlagSet // to tell a given flag from an environment default
	lookupVaultToken func() string
}

// vaultHelp is the vault:// mapping, for the worker's --help (and
// docs/DEPLOY.md says the same).
const vaultHelp = `vault:// secrets are KV version 2 secrets: vault://prod/slack/webhook is key
webhook of the secret at path prod/slack of the KV mount --vault-kv-mount
(default secret), i.e. GET /v1/secret/data/prod/slack, value
data.data.webhook; vault://secret/data/prod/db/password names the mount
itself (mount secret, path prod/db, key password). A source whose second
segment is "data" is always that explicit form. --secret-vault-prefix is
checked on the mount and path a source resolves to, before Vault is asked.
They are read from Vault (--vault-addr, a token from --vault-token-file or
VAULT_TOKEN, or an AppRole login) on every attempt that needs them, or for
development from --dev-vault-dir, where the same secret is the file
<dir>/prod/slack/webhook.`

func (f *vaultFlags) register(fl *pflag.FlagSet) {
	f.fs = fl
	devDefault := envOr("AGENTFLOW_DEV_VAULT_DIR", os.Getenv("AGENTFLOW_VAULT_DIR"))
	fl.StringVar(&f.DevVaultDir, "dev-vault-dir", devDefault,
		"development vault (no Vault server): vault://a/b/key reads the file <dir>/a/b/key (env AGENTFLOW_DEV_VAULT_DIR); not with --vault-addr")
	fl.StringVar(&f.DevVaultDir, "vault-dir", devDefault, "deprecated: use --dev-vault-dir")
	_ = fl.MarkDeprecated("vault-dir", "use --dev-vault-dir (same meaning)")
	fl.StringVar(&f.Addr, "vault-addr", os.Getenv("VAULT_ADDR"),
		"HashiCorp Vault address, https://host:8200: vault:// secrets are read from its KV v2 engine (env VAULT_ADDR)")
	fl.StringVar(&f.TokenFile, "vault-token-file", "",
		"file holding the Vault token (mode 0600; re-read when Vault answers 403, so Vault Agent may rotate it); default: env VAULT_TOKEN")
	fl.StringVar(&f.RoleIDFile, "vault-approle-role-id-file", "", "AppRole login instead of a token: file holding the role ID")
	fl.StringVar(&f.SecretIDFile, "vault-approle-secret-id-file", "", "AppRole login: file holding the secret ID")
	fl.StringVar(&f.Namespace, "vault-namespace", os.Getenv("VAULT_NAMESPACE"), "Vault Enterprise namespace of every request (env VAULT_NAMESPACE)")
	fl.StringVar(&f.CACert, "vault-ca-cert", os.Getenv("VAULT_CACERT"), "PEM file of the CAs Vault's certificate is checked against (env VAULT_CACERT; default: the system roots)")
	fl.StringVar(&f.KVMount, "vault-kv-mount", secrets.DefaultVaultMount, "KV v2 mount of the short vault://path/key form and of short --secret-vault-prefix entries")
}

// config checks the vault flags (usage errors, exit 2) and fills cfg.
func (f *vaultFlags) config(cfg *worker.Config) error {
	if f.fs != nil && f.fs.Changed("dev-vault-dir") && f.fs.Changed("vault-dir") {
		return usageErr("--vault-dir is the old name of --dev-vault-dir: give one")
	}
	if err := secrets.CheckVaultMount(f.KVMount); err != nil {
		return usageErr("--vault-kv-mount: %v", err)
	}
	cfg.VaultKVMount = f.KVMount
	if f.Addr == "" {
		for _, name := range []string{"vault-token-file", "vault-approle-role-id-file", "vault-approle-secret-id-file", "vault-namespace", "vault-ca-cert"} {
			if f.fs != nil && f.fs.Changed(name) {
				return usageErr("--%s needs --vault-addr (or VAULT_ADDR)", name)
			}
		}
		cfg.DevVaultDir = f.DevVaultDir
		return nil
	}
	if f.DevVaultDir != "" {
		from := "--vault-addr"
		if f.fs != nil && !f.fs.Changed("vault-addr") {
			from = "VAULT_ADDR (set in the environment)"
		}
		return usageErr("%s and --dev-vault-dir are two vaults: give one (the directory is for development without a Vault server)", from)
	}
	vc := &vaultkv.Config{Addr: f.Addr, Namespace: f.Namespace, CACert: f.CACert, TokenFile: f.TokenFile,
		MaxRetries: vaultkv.DefaultMaxRetries}
	if f.RoleIDFile != "" || f.SecretIDFile != "" {
		vc.AppRole = &vaultkv.AppRole{RoleIDFile: f.RoleIDFile, SecretIDFile: f.SecretIDFile}
	}
	if vc.TokenFile == "" && vc.AppRole == nil {
		lookup := f.lookupVaultToken
		if lookup == nil {
			lookup = func() string { return os.Getenv("VAULT_TOKEN") }
		}
		vc.Token = lookup()
	}
	if err := vc.Check(); err != nil {
		return usageErr("%v", err)
	}
	cfg.Vault = vc
	return nil
}
