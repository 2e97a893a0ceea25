package worker

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/vaultkv"
)

// secretResolver is the worker's secrets.Resolver: env://, file:// and
// vault:// as far as the policy allows; vault:// from HashiCorp Vault
// (cfg.Vault, --vault-addr) or the development directory (cfg.DevVaultDir),
// never both. The preflight check resolves through the same resolver, so
// its errors classify the same way (failure.SecretType).
func secretResolver(cfg Config, log *slog.Logger) (secrets.Resolver, error) {
	mount := cfg.VaultKVMount
	if mount == "" {
		mount = secrets.DefaultVaultMount
	}
	if err := secrets.CheckVaultMount(mount); err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	s := &secrets.Sources{Policy: cfg.SecretPolicy, VaultMount: mount}
	switch {
	case cfg.Vault != nil && cfg.DevVaultDir != "":
		return nil, errors.New("vault: a Vault address and a development vault directory are two vaults; give one")
	case cfg.Vault != nil:
		vc := *cfg.Vault
		if vc.Logger == nil {
			vc.Logger = log
		}
		v, err := vaultkv.New(vc)
		if err != nil {
			return nil, err
		}
		s.Vault = v
		log.Info("vault:// secrets from Vault KV v2", "vault_addr", vc.Addr, "vault_namespace", vc.Namespace,
			"vault_kv_mount", mount, "vault_auth", vc.Auth())
	case cfg.DevVaultDir != "":
		s.Vault = secrets.DirVault{Dir: cfg.DevVaultDir, Mount: mount}
		log.Info("vault:// secrets from the development vault directory", "dev_vault_dir", cfg.DevVaultDir, "vault_kv_mount", mount)
	}
	return s, nil
}
