package spec

import (
	"github.com/agentflow/agentflow/exechost"

	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
)

// Compile turns a valid spec into the Plan the engine runs: defaults
// applied, dependencies resolved (explicit, then implicit from expressions),
// per-step secrets, and the schedule translated for Temporal. It validates
// first and returns the ErrorList if the spec is invalid.
func Compile(s *Spec) (*Plan, error) {
	if s == nil {
		return nil, fmt.Errorf("compile: nil spec")
	}
	a := analyze(s)
	if err := a.errList().Err(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(s.Source)
	p := &Plan{
		SchemaVersion: PlanSchemaVersion,
		Name:          s.Name,
		Version:       s.Version,
		Description:   s.Description,
		SourceFile:    s.File,
		SpecHash:      hex.EncodeToString(sum[:]),
	}
	for _, in := range s.Inputs {
		p.Inputs = append(p.Inputs, InputDecl{Name: in.Name, Type: InputType(in.Type), Required: in.Required, Default: in.Default})
	}
	for _, sec := range s.Secrets {
		p.Secrets = append(p.Secrets, SecretDecl(sec))
	}
	if s.Workspace != nil && s.Workspace.Git != nil {
		rev := s.Workspace.Git.Revision
		if rev == "" {
			rev = "HEAD"
		}
		p.Workspace = &GitWorkspace{Repository: s.Workspace.Git.Repository, Revision: rev}
	}
	p.Steps = make([]PlanStep, len(s.Steps))
	for i, st := range s.Steps {
		f := a.steps[i]
		ps := PlanStep{
			ID:              st.ID,
			Tool:            st.Tool,
			Image:           st.Image,
			Inputs:          st.Inputs,
			If:              st.If,
			Env:             st.Env,
			Timeout:         f.timeout,
			Retries:         f.retries,
			ContinueOnError: st.ContinueOnError,
			Resources:       f.res,
			Secrets:         f.secrets,
		}
		if len(f.egress.rules) > 0 {
			ps.Egress = f.egress.rules
			if ps.Resources.MaxEgressBytes == 0 {
				ps.Resources.MaxEgressBytes = exechost.DefaultEgressBytes
			}
		} else {
			ps.Resources.MaxEgressBytes = 0 // meaningful only with egress
		}
		if len(st.DependsOn) > 0 {
			ps.ExplicitDependsOn = slices.Clone(st.DependsOn)
		}
		ps.DependsOn = append(slices.Clone(st.DependsOn), f.implicit...)
		if len(ps.DependsOn) == 0 {
			ps.DependsOn = nil
		}
		if st.Approval != nil {
			// Approval steps run no sandbox: no limits, no retries.
			ps.Approval = &Approval{Prompt: st.Approval.Prompt, Timeout: f.approval}
			ps.Timeout, ps.Retries, ps.Resources, ps.Egress = 0, 0, Resources{}, nil
		}
		p.Steps[i] = ps
	}
	for _, o := range s.Outputs {
		p.Outputs = append(p.Outputs, OutputDecl(o))
	}
	if s.Schedule != nil {
		p.Schedule = &PlanSchedule{Cron: s.Schedule.Cron, Timezone: s.Schedule.Timezone, TemporalCron: a.temporalCron}
	}
	if s.Notify != nil && len(s.Notify.Webhooks) > 0 {
		p.Notify = slices.Clone(s.Notify.Webhooks)
	}
	return p, nil
}

// Load is parse -> validate -> compile: the one entry point for
// `agentctl validate`, `run`, `graph` and tests. Errors are an ErrorList
// with every problem found.
func Load(filename string, data []byte) (*Plan, error) {
	s, err := Parse(filename, data)
	if s == nil {
		return nil, err
	}
	// Parse problems are part of the analysis, so everything is reported at once.
	return Compile(s)
}

// LoadFile reads and loads a spec file. The size cap is enforced before the
// whole file is read.
func LoadFile(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	if st.Size() > MaxSpecSize {
		return nil, ErrorList{{File: path, Line: 1, Col: 1, Msg: fmt.Sprintf("file is %d bytes, over the %d byte (1 MiB) limit", st.Size(), MaxSpecSize), Cause: &LimitError{Msg: "file too large"}}}
	}
	// The limit reader keeps a file that grows after Stat bounded too.
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecSize+1))
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	return Load(path, data)
}
