package cli

// engineVerbs are the verbs that need Temporal or Docker. The lean build of
// agentctl (-tags lite, what `make build` installs as bin/agentctl) links
// none of their dependencies, so that `validate` and `graph` start in a few
// milliseconds; it hands these verbs to bin/agentctl-engine (the full build)
// by exec. A test keeps this list equal to the full build's verbs.
var engineVerbs = []struct{ Name, Short string }{
	{"run", "Submit a spec as a new agent run"},
	{"inspect", "Print an agent's inspect document"},
	{"list", "List agents"},
	{"cancel", "Cancel a running agent"},
	{"resume", "Re-run an agent from a step (or its failed steps)"},
	{"approve", "Approve or reject an approval step"},
	{"logs", "Print a step's tool logs"},
	{"tool", "Manage the tool registry"},
	{"worker", "Run the agentflow worker"},
	{"dev", "Run the Temporal dev server and a worker in the foreground"},
	{"schedule", "Manage cron schedules of specs (Temporal Schedules)"},
}
