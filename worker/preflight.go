package worker

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/agentflow/agentflow/exechost/docker"
)

// PreflightMode says what the worker does with the sandbox preflight.
type PreflightMode string

const (
	// PreflightEnforce (the default): a failed check stops the worker.
	PreflightEnforce PreflightMode = "enforce"
	// PreflightWarn logs failed checks and serves anyway.
	PreflightWarn PreflightMode = "warn"
	// PreflightOff skips the checks.
	PreflightOff PreflightMode = "off"
)

// ParsePreflightMode accepts "" (enforce), enforce, warn, off.
func ParsePreflightMode(s string) (PreflightMode, error) {
	switch m := PreflightMode(s); m {
	case "":
		return PreflightEnforce, nil
	case PreflightEnforce, PreflightWarn, PreflightOff:
		return m, nil
	}
	return "", fmt.Errorf("preflight mode %q: want enforce, warn or off", s)
}

// runPreflight checks the sandbox on this daemon before the worker serves
// (docs/security/sandbox-kernel.md). Versions and every check are logged;
// under enforce a failed check, or checks that cannot run, is an error.
func runPreflight(ctx context.Context, mode PreflightMode, host *docker.Host, log *slog.Logger) error {
	if mode == PreflightOff {
		log.Warn("sandbox preflight disabled (--preflight off)")
		return nil
	}
	rep, err := host.Preflight(ctx, docker.PreflightOptions{})
	if err != nil {
		err = fmt.Errorf("sandbox preflight could not run: %w", err)
		if mode == PreflightWarn {
			log.Error("serving without a preflight (--preflight warn)", "error", err)
			return nil
		}
		return err
	}
	log.Info("sandbox daemon", "docker_version", rep.DockerVersion, "kernel_version", rep.KernelVersion,
		"runc_version", rep.RuncVersion, "containerd_version", rep.ContainerdVersion, "default_runtime", rep.DefaultRuntime,
		"sandbox_runtime", rep.Runtime)
	for _, c := range rep.Checks {
		switch {
		case c.OK && c.Detail != "":
			log.Info("sandbox preflight check passed", "check", c.Name, "note", c.Detail)
		case c.OK:
			log.Info("sandbox preflight check passed", "check", c.Name)
		case c.Skipped:
			// Cannot be observed under this runtime: said, never passed.
			log.Warn("sandbox preflight check skipped", "check", c.Name, "runtime", rep.Runtime, "reason", c.Detail)
		default:
			log.Error("sandbox preflight check FAILED", "check", c.Name, "detail", c.Detail)
		}
	}
	if err := rep.Err(); err != nil {
		if mode == PreflightWarn {
			log.Error("serving sandboxes although the preflight failed (--preflight warn)", "error", err)
			return nil
		}
		return fmt.Errorf("%w (override with --preflight warn)", err)
	}
	return nil
}
