package spec

import "gopkg.in/yaml.v3"

// This file is the raw spec model: the YAML format exactly as users write it.
// The decoder (decode.go) and the JSON Schema generator (schema.go) are both
// driven by these struct tags, so the schema cannot drift from the parser:
//
//	yaml:"name"      the YAML key
//	doc:"..."        description shown by editors (yaml-language-server)
//	required:"true"  the key must be present
//	enum/pattern/min/max/example  extra JSON Schema constraints for editors;
//	                 the validator (validate.go) is the authority.

// Spec is a parsed (not yet validated) agent workflow spec.
type Spec struct {
	Name        string     `yaml:"name" required:"true" pattern:"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$" doc:"Workflow name: a DNS label (lowercase letters, digits and '-', at most 63 characters)."`
	Version     string     `yaml:"version" required:"true" doc:"Semantic version of this spec, e.g. \"2.3.1\" (quote it so YAML keeps it a string)."`
	Description string     `yaml:"description" doc:"Free-form description."`
	Inputs      InputList  `yaml:"inputs" doc:"Run inputs, referenced as {{ .inputs.NAME }}. An empty mapping {} means no inputs."`
	Secrets     []Secret   `yaml:"secrets" doc:"Secrets the worker resolves at run time; referenced only as a whole string {{ .secrets.NAME }}."`
	Workspace   *Workspace `yaml:"workspace" doc:"Initial workspace of root steps (default: empty)."`
	Defaults    *Defaults  `yaml:"defaults" doc:"Defaults for every step (timeout, retries, resources)."`
	Steps       []Step     `yaml:"steps" required:"true" doc:"The steps of the DAG. Order is kept for display; execution follows dependencies."`
	Outputs     []Output   `yaml:"outputs" doc:"Run outputs, evaluated when the run ends."`
	Schedule    *Schedule  `yaml:"schedule" doc:"Cron schedule used by 'agentctl schedule create'."`
	Notify      *Notify    `yaml:"notify" doc:"Webhooks called when the run ends (SUCCEEDED, FAILED, CANCELED)."`

	// File is the name the spec was loaded from (for error positions).
	File string `yaml:"-"`
	// Source is the raw bytes the spec was parsed from (for the spec hash).
	Source []byte `yaml:"-"`

	// nodes maps a field path ("steps[1].timeout") to its value node and
	// keys to its key node, so validation can report file:line:col.
	nodes map[string]*yaml.Node
	keys  map[string]*yaml.Node
	// order keeps the key order of free-form maps (step inputs, env) so
	// implicit dependencies are found in source order.
	order map[string][]string
	// bad marks paths whose value had the wrong type; validation skips
	// them so one mistake is reported once.
	bad   map[string]bool
	lines []string // Source split into lines, on first need
	// parseErrs are problems found while decoding; Validate reports them
	// together with its own.
	parseErrs    ErrorList
	parseDropped bool
}

// InputList is a list of input declarations; `inputs: {}` is accepted as
// the empty list because the seed daily-news spec writes it that way.
type InputList []Input

type Input struct {
	Name     string `yaml:"name" required:"true" pattern:"^[A-Za-z][A-Za-z0-9_]*$" doc:"Input name."`
	Type     string `yaml:"type" required:"true" enum:"string,number,boolean,object,array" doc:"JSON type of the input."`
	Required bool   `yaml:"required" doc:"The run must supply this input."`
	Default  any    `yaml:"default" doc:"Value used when the run does not supply the input; must match type."`
}

type Secret struct {
	Name   string `yaml:"name" required:"true" pattern:"^[A-Za-z][A-Za-z0-9_]*$" doc:"Secret name, referenced as {{ .secrets.NAME }}."`
	Source string `yaml:"source" required:"true" pattern:"^(env://|file:///|vault://)" doc:"Where the worker resolves the secret: env://VAR, file:///abs/path or vault://path/key."`
}

type Workspace struct {
	Git *GitSource `yaml:"git" doc:"Start root steps from a git revision (its files only, no .git; the repository must lie under a worker --git-root)."`
}

type GitSource struct {
	Repository string `yaml:"repository" required:"true" doc:"Repository path or URL readable by the worker."`
	Revision   string `yaml:"revision" doc:"Revision to archive (branch, tag or commit; default HEAD). Must not start with '-'."`
}

type Defaults struct {
	Timeout   string        `yaml:"timeout" example:"60s" doc:"Default per-attempt timeout (Go duration, plus 'd' for days). Built-in: 10m."`
	Retries   *int          `yaml:"retries" min:"0" max:"10" doc:"Default extra attempts after a failure (0-10). Built-in: 0."`
	Resources *ResourceSpec `yaml:"resources" doc:"Default resource limits. Built-in: cpu 1, memory 512Mi, disk 256Mi, pids 256, max_output 8Mi, max_egress 64Mi."`
	Egress    []EgressEntry `yaml:"egress" doc:"Default egress allow-list of steps that declare none (built-in: none, network off)."`
}

// Step is one node of the DAG: exactly one of tool, image or approval.
type Step struct {
	ID              string            `yaml:"id" required:"true" pattern:"^[a-z0-9_]+$" doc:"Unique step id ([a-z0-9_]+), referenced as {{ .steps.ID.output... }} and in depends_on."`
	Tool            string            `yaml:"tool" pattern:"^[a-z0-9][a-z0-9._/-]*:[A-Za-z0-9][A-Za-z0-9._+-]*$" doc:"Registered tool as name:version, e.g. imap-fetcher:1.2."`
	Image           string            `yaml:"image" pattern:"@?sha256:[0-9a-f]{64}$" doc:"Digest-pinned image: repo@sha256:<64 hex> or a local image ID sha256:<64 hex>."`
	Approval        *ApprovalSpec     `yaml:"approval" doc:"Human approval step: waits for 'agentctl approve'. Takes no tool, inputs, env or resources."`
	Inputs          map[string]any    `yaml:"inputs" doc:"JSON object passed to the tool on stdin; strings may contain {{ }} expressions."`
	DependsOn       []string          `yaml:"depends_on" doc:"Steps that must finish first. Steps referenced by expressions are added implicitly."`
	If              string            `yaml:"if" doc:"Condition, a single {{ }} expression; false skips the step."`
	Timeout         string            `yaml:"timeout" example:"30s" doc:"Per-attempt timeout (Go duration, plus 'd' for days)."`
	Retries         *int              `yaml:"retries" min:"0" max:"10" doc:"Extra attempts after a failure (0-10), exponential backoff."`
	ContinueOnError bool              `yaml:"continue_on_error" doc:"A failure of this step does not fail the run."`
	Resources       *ResourceSpec     `yaml:"resources" doc:"Resource limits of the step's sandbox."`
	Env             map[string]string `yaml:"env" doc:"Environment variables. Names that look like secrets must take exactly {{ .secrets.NAME }}."`
	Egress          []EgressEntry     `yaml:"egress" doc:"Services the step may reach through the worker's egress proxy: \"host:port\" or {host: \"host:port\", headers: {...}}. Without it the sandbox has no network (only lo)."`
}

// EgressEntry is one allow-list entry: "host:port" (a lower-case DNS name,
// a leading "*." allowed, never an IP literal), written as a plain string
// or as a mapping with headers the proxy adds to requests to that host.
type EgressEntry struct {
	Host    string            `yaml:"host" required:"true" example:"api.openai.com:443" doc:"host:port; a leading *. matches every name under the domain (not the domain itself)."`
	Headers map[string]string `yaml:"headers" doc:"Headers the egress proxy sets on requests to this host (TLS is terminated for it); values are text with {{ .secrets.NAME }} placeholders, never seen by the tool."`
}

// Quantity is a scalar written as a string or a number (cpu: 2, cpu: "1.5").
type Quantity string

type ResourceSpec struct {
	CPU       Quantity `yaml:"cpu" example:"1.5" doc:"CPU cores: \"1.5\", \"500m\" or 2."`
	Memory    Quantity `yaml:"memory" example:"512Mi" doc:"Memory limit: bytes or 512Mi, 4Gi, 1G (m/g alone are ambiguous and refused)."`
	Disk      Quantity `yaml:"disk" example:"1Gi" doc:"Size of the /workspace tmpfs."`
	Pids      *int     `yaml:"pids" min:"1" max:"32768" doc:"Maximum number of processes."`
	GPU       Quantity `yaml:"gpu" example:"1" doc:"Whole GPUs: \"1\", \"2\" or \"all\". Fractions are not supported."`
	MaxOutput Quantity `yaml:"max_output" example:"8Mi" doc:"Cap on the tool's combined stdout+stderr."`
	MaxEgress Quantity `yaml:"max_egress" example:"64Mi" doc:"Bytes through the egress proxy, both directions (steps with egress only; default 64Mi)."`
}

type ApprovalSpec struct {
	Prompt  string `yaml:"prompt" required:"true" doc:"Question shown to the approver."`
	Timeout string `yaml:"timeout" example:"24h" doc:"How long to wait before the step fails (default 24h)."`
}

type Output struct {
	Name  string `yaml:"name" required:"true" pattern:"^[A-Za-z][A-Za-z0-9_]*$" doc:"Output name."`
	Value string `yaml:"value" required:"true" doc:"Value, usually a {{ }} expression over steps and inputs."`
}

type Schedule struct {
	Cron     string `yaml:"cron" required:"true" example:"0 0 9 * * ?" doc:"5-field standard cron, or 6/7-field Quartz (seconds first, ? = *, optional year; day-of-week 1=SUN..7=SAT)."`
	Timezone string `yaml:"timezone" example:"America/Los_Angeles" doc:"IANA time zone name (default UTC)."`
}

type Notify struct {
	Webhooks []string `yaml:"webhooks" doc:"http(s) URLs that receive a JSON event when the run ends."`
}
