package cli

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"
)

// Verb is one engine verb: a verb that needs Temporal or Docker.
type Verb struct {
	Name  string
	Short string // the one-line help both builds print
}

// EngineVerbs is the one table of engine verbs, in help order. Both builds
// read it: the full build (cmd/agentctl → bin/agentctl-engine) attaches the
// constructors of internal/cli/engine to it, the lean build
// (cmd/agentctl-lean → bin/agentctl) a forwarding stub per verb. The short
// help lives here and nowhere else, so `agentctl --help` is the same text
// in both builds.
var EngineVerbs = []Verb{
	{"run", "Submit an agent run"},
	{"inspect", "Show an agent run's status document (JSON)"},
	{"list", "List agent runs"},
	{"cancel", "Cancel a running agent"},
	{"resume", "Re-run part of a finished agent as a new run"},
	{"approve", "Approve (or reject) an approval step"},
	{"logs", "Show a step's tool logs"},
	{"tool", "Manage the tool registry (stored in Temporal)"},
	{"schedule", "Manage cron schedules of specs (Temporal Schedules)"},
	{"worker", "Run an agentflow worker (workflows, sandboxed steps, health, metrics)"},
	{"dev", "Run a Temporal dev server and a worker in the foreground"},
	{"setup", "Prepare a Temporal namespace for agentflow (search attributes, namespace)"},
	{"gc", "Delete checkpoints, logs and attempt records of runs past retention"},
	{"codec-server", "Serve the payload codec endpoint for the Temporal Web UI (decrypts with --codec-key-file)"},
}

// Constructors builds the engine verbs, by verb name. Its keys must be
// exactly the names in EngineVerbs.
type Constructors map[string]func(*Options) *cobra.Command

// addEngineCommands adds one command per engine verb: the real one when
// engine has constructors, a forwarding stub otherwise.
func addEngineCommands(root *cobra.Command, opts *Options, engine Constructors) {
	if engine != nil {
		if err := CheckConstructors(engine); err != nil {
			// A build-time mistake that TestEngineVerbTable catches.
			panic(err)
		}
	}
	for _, v := range EngineVerbs {
		var cmd *cobra.Command
		if engine != nil {
			cmd = engine[v.Name](opts)
			if cmd.Name() != v.Name {
				panic(fmt.Sprintf("agentctl: constructor for %q builds %q", v.Name, cmd.Name()))
			}
		} else {
			cmd = forwardingStub(v.Name)
		}
		cmd.Short = v.Short
		root.AddCommand(cmd)
	}
}

// CheckConstructors reports a verb of EngineVerbs without a constructor, or
// a constructor for a verb the table does not list.
func CheckConstructors(engine Constructors) error {
	for _, v := range EngineVerbs {
		if engine[v.Name] == nil {
			return fmt.Errorf("agentctl: engine verb %q has no constructor", v.Name)
		}
	}
	for name := range engine {
		if !isEngineVerb(name) {
			return fmt.Errorf("agentctl: constructor %q is not in the verb table (verbs.go)", name)
		}
	}
	return nil
}

func isEngineVerb(name string) bool {
	return slices.ContainsFunc(EngineVerbs, func(v Verb) bool { return v.Name == name })
}
