package spec

import (
	"sort"
	"strconv"
	"time"
)

// PlanSchemaVersion is bumped whenever the Plan's shape or meaning changes;
// the workflow branches on it (together with workflow.GetVersion) so runs
// started with an older Plan keep replaying.
const PlanSchemaVersion = 1

// Plan is a parsed, validated and compiled spec: the only thing the engine
// (workflow, activities, CLI) consumes. It is plain data that survives a JSON
// round trip, because it travels as workflow input through Temporal history.
// Order matters and is deterministic: Steps keep spec order.
type Plan struct {
	SchemaVersion int           `json:"schema_version"`
	Name          string        `json:"name"`
	Version       string        `json:"version"`
	Description   string        `json:"description,omitempty"`
	Inputs        []InputDecl   `json:"inputs,omitempty"`
	Secrets       []SecretDecl  `json:"secrets,omitempty"`
	Workspace     *GitWorkspace `json:"workspace,omitempty"`
	Steps         []PlanStep    `json:"steps"`
	Outputs       []OutputDecl  `json:"outputs,omitempty"`
	Schedule      *PlanSchedule `json:"schedule,omitempty"`
	Notify        []string      `json:"notify,omitempty"` // webhook URLs
	SourceFile    string        `json:"source_file,omitempty"`
	SpecHash      string        `json:"spec_hash,omitempty"` // sha256 of the source bytes
}

// InputType is the declared JSON type of a run input.
type InputType string

const (
	TypeString  InputType = "string"
	TypeNumber  InputType = "number"
	TypeBoolean InputType = "boolean"
	TypeObject  InputType = "object"
	TypeArray   InputType = "array"
)

type InputDecl struct {
	Name     string    `json:"name"`
	Type     InputType `json:"type"`
	Required bool      `json:"required,omitempty"`
	Default  any       `json:"default,omitempty"`
}

// SecretDecl declares a secret and where the worker resolves it:
// env://VAR, file:///path or vault://path/key. The value never enters the Plan.
type SecretDecl struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

type GitWorkspace struct {
	Repository string `json:"repository"`
	Revision   string `json:"revision"`
}

// Resources are a step's effective limits after defaults are applied.
type Resources struct {
	NanoCPUs       int64 `json:"nano_cpus"`
	MemoryBytes    int64 `json:"memory_bytes"`
	DiskBytes      int64 `json:"disk_bytes"`
	Pids           int64 `json:"pids"`
	GPUs           int   `json:"gpus,omitempty"` // 0 none, -1 all
	MaxOutputBytes int64 `json:"max_output_bytes"`
	// MaxEgressBytes bounds the bytes through the egress boundary, both
	// directions (resources.max_egress); set only on steps with Egress.
	MaxEgressBytes int64 `json:"max_egress_bytes,omitempty"`
}

// EgressRule is one entry of a step's egress list: a host (a DNS name, or
// "*." + name) and port the step's sandbox may reach through the worker's
// egress proxy, and headers the proxy adds to requests to it. Header
// values are templates of literal text and {{ .secrets.NAME }} only,
// substituted on the worker inside the proxy's configuration: the tool
// never sees them.
type EgressRule struct {
	Host    string            `json:"host"`
	Port    int               `json:"port"`
	Headers map[string]string `json:"headers,omitempty"`
}

// String is "host:port", then the names of the headers the proxy adds
// (never their values): "api.openai.com:443 +Authorization".
func (r EgressRule) String() string {
	s := r.Host + ":" + strconv.Itoa(r.Port)
	names := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, n := range names {
		s += " +" + n
	}
	return s
}

type Approval struct {
	Prompt  string        `json:"prompt"`
	Timeout time.Duration `json:"timeout"`
}

// PlanStep is one node of the DAG. Exactly one of Tool, Image and Approval
// is set. Template strings ({{ }}) are kept verbatim in Inputs, If, Env and
// evaluated at run time.
type PlanStep struct {
	ID string `json:"id"`
	// Tool is "name:version" of a registered tool; ImageRef is filled when the
	// tool is resolved at submission (the digest the run is pinned to).
	Tool     string    `json:"tool,omitempty"`
	Image    string    `json:"image,omitempty"`
	Approval *Approval `json:"approval,omitempty"`

	Inputs map[string]any    `json:"inputs,omitempty"`
	If     string            `json:"if,omitempty"`
	Env    map[string]string `json:"env,omitempty"`

	// DependsOn is explicit depends_on in spec order, then implicit
	// dependencies (steps referenced by expressions) in first-reference order.
	DependsOn []string `json:"depends_on,omitempty"`
	// ExplicitDependsOn is the depends_on list as written; workspace layering
	// follows it (later wins).
	ExplicitDependsOn []string `json:"explicit_depends_on,omitempty"`

	// Timeout is per attempt. Compile sets it on every tool step (the
	// step's, else defaults.timeout, else DefaultTimeout); it is the one
	// input of the attempt's time budget (activities.BudgetFor).
	Timeout         time.Duration `json:"timeout"`
	Retries         int           `json:"retries"` // extra attempts
	ContinueOnError bool          `json:"continue_on_error,omitempty"`
	Resources       Resources     `json:"resources"`
	// Egress is what the step may reach (empty: network none, only lo).
	Egress []EgressRule `json:"egress,omitempty"`
	// Secrets lists the secret names this step's expressions reference; the
	// worker resolves exactly these.
	Secrets []string `json:"secrets,omitempty"`
}

type OutputDecl struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// PlanSchedule is the spec's schedule, with the cron translated for Temporal.
type PlanSchedule struct {
	Cron     string `json:"cron"` // as written in the spec
	Timezone string `json:"timezone,omitempty"`
	// TemporalCron is the same schedule in the syntax Temporal's
	// ScheduleSpec.CronExpressions accepts.
	TemporalCron string `json:"temporal_cron"`
}

// Step returns the step with the given ID.
func (p *Plan) Step(id string) (*PlanStep, bool) {
	for i := range p.Steps {
		if p.Steps[i].ID == id {
			return &p.Steps[i], true
		}
	}
	return nil, false
}
