package spec

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones on any machine: validation must not depend on the host's zoneinfo

	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/secrets"
)

// Built-in defaults, used when neither the step nor the spec's defaults set
// a value. They are part of the format: changing them changes what existing
// specs mean, so they are documented in the schema and docs.
const (
	DefaultTimeout         = 10 * time.Minute
	DefaultRetries         = 0
	DefaultNanoCPUs        = 1_000_000_000 // 1 CPU
	DefaultMemoryBytes     = 512 << 20     // 512Mi
	DefaultDiskBytes       = 256 << 20     // 256Mi
	DefaultPids            = 256
	DefaultMaxOutputBytes  = 8 << 20 // 8Mi
	DefaultApprovalTimeout = 24 * time.Hour
)

// Bounds. Minimums are the sandbox floors every host shares (exechost);
// maximums catch typos (4Ti of memory).
const (
	MaxRetries      = 10
	MaxStepTimeout  = 7 * 24 * time.Hour
	MaxApprovalWait = 365 * 24 * time.Hour
	minNanoCPUs     = exechost.MinNanoCPUs
	maxNanoCPUs     = 256 * 1_000_000_000
	minMemoryBytes  = exechost.MinMemoryBytes
	maxMemoryBytes  = 1 << 40
	minDiskBytes    = exechost.MinDiskBytes
	maxDiskBytes    = 1 << 40
	minPids         = exechost.MinPids
	maxPids         = 32768
	minOutputBytes  = 1 << 10
	maxOutputBytes  = 1 << 30
	maxGPUs         = 64
	maxIDLen        = 63
)

var (
	nameRe   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	semverRe = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	symbolRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	stepIDRe = regexp.MustCompile(`^[a-z0-9_]+$`)
	toolRe   = regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]*:[A-Za-z0-9][A-Za-z0-9._+-]*$`)
)

// LooksSecret reports whether an env var name looks like it carries a
// credential (token, secret, password, API key, ...): the sandbox rule
// every host applies, exechost.LooksSecret.
func LooksSecret(name string) bool { return exechost.LooksSecret(name) }

// Validate checks a parsed spec and returns every problem at once as an
// ErrorList (nil when the spec is valid), including those Parse found.
func Validate(s *Spec) error {
	if s == nil {
		return errors.New("validate: nil spec")
	}
	return analyze(s).errList().Err()
}

// analysis is what validation learns and compilation needs.
type analysis struct {
	errs    ErrorList
	dropped bool // problems beyond MaxErrors were not collected
	steps   []stepFacts
	// resolved values, valid only when errs is empty
	defaultTimeout time.Duration
	defaultRetries int
	defaultRes     Resources
	defaultEgress  egressFacts
	temporalCron   string
}

func (a *analysis) errList() ErrorList { return a.errs.dedupe().truncate(a.dropped) }

// full reports whether no more problems will be collected; expensive
// checks (suggestions over every step) are skipped then.
func (v *validator) full() bool { return len(v.a.errs) >= MaxErrors }

func (v *validator) add(e *Error) {
	if v.full() {
		v.a.dropped = true
		return
	}
	v.a.errs = append(v.a.errs, e)
}

type stepFacts struct {
	implicit []string // steps referenced by expressions, first-reference order
	secrets  []string // secrets referenced, first-reference order
	timeout  time.Duration
	retries  int
	res      Resources
	approval time.Duration
	egress   egressFacts
}

type validator struct {
	s   *Spec
	a   *analysis
	ids map[string]int // step id -> index
}

func (v *validator) errf(path, format string, args ...any) {
	v.errAtNode(v.s.nodeAt(path), path, nil, format, args...)
}

func (v *validator) errAtNode(n *yaml.Node, path string, cause error, format string, args ...any) {
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Column
	}
	v.add(&Error{File: v.s.File, Line: line, Col: col, Path: path, Msg: fmt.Sprintf(format, args...), Cause: cause})
}

// errKey reports at the key of path (e.g. a field that must not be there).
func (v *validator) errKey(path, format string, args ...any) {
	n := v.s.keys[path]
	if n == nil {
		n = v.s.nodeAt(path)
	}
	v.errAtNode(n, path, nil, format, args...)
}

// errOffset reports at a byte offset inside the string value at path.
func (v *validator) errOffset(path string, off int, format string, args ...any) {
	n := v.s.nodeAt(path)
	line, col := scalarOffsetPos(v.s.sourceLines(), n, off)
	v.add(&Error{File: v.s.File, Line: line, Col: col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// has reports whether the field at path was written with a value of the
// right type (type errors are reported once, by the decoder).
func (v *validator) has(path string) bool {
	_, ok := v.s.keys[path]
	return ok && !v.s.bad[path]
}

func analyze(s *Spec) *analysis {
	v := &validator{s: s, a: &analysis{errs: append(ErrorList(nil), s.parseErrs...), dropped: s.parseDropped}, ids: map[string]int{}}
	v.checkHeader()
	inputs := v.checkInputs()
	secrets := v.checkSecrets()
	v.checkWorkspace()
	v.checkDefaults()
	v.checkSteps(inputs, secrets)
	v.checkOutputs(inputs, secrets)
	v.checkSchedule()
	v.checkNotify()
	return v.a
}

func (v *validator) checkHeader() {
	s := v.s
	if !nameRe.MatchString(s.Name) && v.has("name") {
		v.errf("name", "invalid name %q: want a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)", s.Name)
	}
	if v.has("version") && !semverRe.MatchString(s.Version) {
		hint := ""
		if strings.HasPrefix(s.Version, "v") && semverRe.MatchString(s.Version[1:]) {
			hint = fmt.Sprintf(" (drop the v: %q)", s.Version[1:])
		}
		v.errf("version", "invalid version %q: want a semantic version like \"1.2.3\"%s", s.Version, hint)
	}
	if v.has("steps") && len(s.Steps) == 0 {
		v.errf("steps", "a spec needs at least one step")
	}
}

func (v *validator) checkInputs() map[string]bool {
	names := map[string]bool{}
	for i, in := range v.s.Inputs {
		p := fmt.Sprintf("inputs[%d]", i)
		v.checkSymbol(p+".name", in.Name, "input")
		if names[in.Name] {
			v.errf(p+".name", "duplicate input %q", in.Name)
		}
		names[in.Name] = true
		t := InputType(in.Type)
		switch t {
		case TypeString, TypeNumber, TypeBoolean, TypeObject, TypeArray:
		default:
			if v.has(p + ".type") {
				v.errf(p+".type", "invalid type %q: want string, number, boolean, object or array", in.Type)
			}
			continue
		}
		if in.Default != nil {
			if in.Required {
				v.errf(p+".default", "input %q is required, so its default would never be used", in.Name)
			}
			if !valueHasType(in.Default, t) {
				v.errf(p+".default", "default of input %q is not of type %s", in.Name, t)
			}
		}
	}
	return names
}

func valueHasType(val any, t InputType) bool {
	switch val.(type) {
	case string:
		return t == TypeString
	case float64:
		return t == TypeNumber
	case bool:
		return t == TypeBoolean
	case map[string]any:
		return t == TypeObject
	case []any:
		return t == TypeArray
	}
	return false
}

func (v *validator) checkSymbol(path, name, what string) {
	if !v.has(path) {
		return
	}
	if !symbolRe.MatchString(name) {
		v.errf(path, "invalid %s name %q: want a letter followed by letters, digits or '_'", what, name)
	}
}

func (v *validator) checkSecrets() map[string]bool {
	names := map[string]bool{}
	for i, sec := range v.s.Secrets {
		p := fmt.Sprintf("secrets[%d]", i)
		v.checkSymbol(p+".name", sec.Name, "secret")
		if names[sec.Name] {
			v.errf(p+".name", "duplicate secret %q", sec.Name)
		}
		names[sec.Name] = true
		if v.has(p + ".source") {
			if err := checkSecretSource(sec.Source); err != nil {
				v.errf(p+".source", "%v", err)
			}
		}
	}
	return names
}

// checkSecretSource: the form (secrets.ParseSource, the one parser) and
// what no worker ever resolves (secrets.Forbidden: worker settings such as
// env://VAULT_TOKEN, files under /proc, /sys, /dev). Whether a particular
// worker allows the source is that worker's policy, checked at run time.
func checkSecretSource(src string) error {
	s, err := secrets.ParseSource(src)
	if err != nil {
		return err
	}
	return secrets.Forbidden(s)
}

func (v *validator) checkWorkspace() {
	w := v.s.Workspace
	if w == nil {
		return
	}
	if w.Git == nil {
		v.errf("workspace", "workspace needs git: {repository, revision}")
		return
	}
	if v.has("workspace.git.repository") {
		r := w.Git.Repository
		switch {
		case strings.TrimSpace(r) == "":
			v.errf("workspace.git.repository", "repository must not be empty")
		case strings.HasPrefix(r, "-"):
			v.errf("workspace.git.repository", "repository %q looks like a command-line option", r)
		case strings.ContainsAny(r, "\x00\n\r"):
			v.errf("workspace.git.repository", "repository contains control characters")
		}
	}
	if v.has("workspace.git.revision") {
		r := w.Git.Revision
		switch {
		case r == "":
			v.errf("workspace.git.revision", "revision must not be empty (omit it for HEAD)")
		case strings.HasPrefix(r, "-"):
			v.errf("workspace.git.revision", "revision %q looks like a command-line option", r)
		case exechost.CheckRevision(r) != nil:
			v.errf("workspace.git.revision", "revision %q is not a plain branch, tag or commit", r)
		}
	}
}

func (v *validator) checkDefaults() {
	a := v.a
	a.defaultTimeout, a.defaultRetries = DefaultTimeout, DefaultRetries
	a.defaultRes = Resources{NanoCPUs: DefaultNanoCPUs, MemoryBytes: DefaultMemoryBytes, DiskBytes: DefaultDiskBytes, Pids: DefaultPids, MaxOutputBytes: DefaultMaxOutputBytes}
	d := v.s.Defaults
	if d == nil {
		return
	}
	if d.Timeout != "" || v.has("defaults.timeout") {
		a.defaultTimeout = v.checkDuration("defaults.timeout", d.Timeout, MaxStepTimeout, a.defaultTimeout)
	}
	if d.Retries != nil {
		a.defaultRetries = v.checkRetries("defaults.retries", *d.Retries)
	}
	a.defaultRes = v.checkResources("defaults.resources", d.Resources, a.defaultRes)
}

func (v *validator) checkDuration(path, s string, maxD, fallback time.Duration) time.Duration {
	d, err := ParseDuration(s)
	switch {
	case err != nil:
		v.errf(path, "%v", err)
		return fallback
	case d <= 0:
		v.errf(path, "duration %q must be positive", s)
		return fallback
	case d > maxD:
		v.errf(path, "duration %q is longer than the maximum %s", s, fmtDuration(maxD))
		return fallback
	}
	return d
}

func fmtDuration(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func (v *validator) checkRetries(path string, n int) int {
	if n < 0 || n > MaxRetries {
		v.errf(path, "retries %d out of range 0-%d", n, MaxRetries)
		return 0
	}
	return n
}

// checkResources validates r and returns base with r's fields applied.
func (v *validator) checkResources(path string, r *ResourceSpec, base Resources) Resources {
	if r == nil {
		return base
	}
	out := base
	size := func(field string, q Quantity, dst *int64, lo, hi int64) {
		p := path + "." + field
		if !v.has(p) || q == "" {
			return
		}
		n, err := ParseSize(string(q))
		switch {
		case err != nil:
			v.errf(p, "%v", err)
		case n < lo || n > hi:
			v.errf(p, "%s %s out of range %s-%s", field, q, fmtBytes(lo), fmtBytes(hi))
		default:
			*dst = n
		}
	}
	if p := path + ".cpu"; v.has(p) && r.CPU != "" {
		n, err := ParseCPU(string(r.CPU))
		switch {
		case err != nil:
			v.errf(p, "%v", err)
		case n < minNanoCPUs || n > maxNanoCPUs:
			v.errf(p, "cpu %s out of range 0.01-%d", r.CPU, maxNanoCPUs/1_000_000_000)
		default:
			out.NanoCPUs = n
		}
	}
	size("memory", r.Memory, &out.MemoryBytes, minMemoryBytes, maxMemoryBytes)
	size("disk", r.Disk, &out.DiskBytes, minDiskBytes, maxDiskBytes)
	size("max_output", r.MaxOutput, &out.MaxOutputBytes, minOutputBytes, maxOutputBytes)
	size("max_egress", r.MaxEgress, &out.MaxEgressBytes, minEgressBytes, maxEgressBytes)
	if r.Pids != nil {
		if *r.Pids < minPids || *r.Pids > maxPids {
			v.errf(path+".pids", "pids %d out of range %d-%d", *r.Pids, minPids, maxPids)
		} else {
			out.Pids = int64(*r.Pids)
		}
	}
	if p := path + ".gpu"; v.has(p) && r.GPU != "" {
		n, err := ParseGPU(string(r.GPU))
		switch {
		case err != nil:
			v.errf(p, "%v", err)
		case n > maxGPUs:
			v.errf(p, "gpu %d out of range 0-%d", n, maxGPUs)
		default:
			out.GPUs = n
		}
	}
	return out
}

func fmtBytes(n int64) string {
	for _, u := range []struct {
		s string
		n int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n%u.n == 0 {
			return fmt.Sprintf("%d%s", n/u.n, u.s)
		}
	}
	return fmt.Sprintf("%d", n)
}

func (v *validator) checkOutputs(inputs, secrets map[string]bool) {
	seen := map[string]bool{}
	for i, o := range v.s.Outputs {
		p := fmt.Sprintf("outputs[%d]", i)
		v.checkSymbol(p+".name", o.Name, "output")
		if seen[o.Name] {
			v.errf(p+".name", "duplicate output %q", o.Name)
		}
		seen[o.Name] = true
		if v.has(p+".value") && o.Value == "" {
			v.errf(p+".value", "output value must not be empty")
		}
		v.checkTemplate(p+".value", o.Value, useOutput, -1, inputs, secrets, nil)
	}
}

func (v *validator) checkSchedule() {
	sc := v.s.Schedule
	if sc == nil {
		return
	}
	if v.has("schedule.cron") {
		t, err := TranslateCron(sc.Cron)
		var ce *CronError
		switch {
		case errors.As(err, &ce):
			v.errOffset("schedule.cron", ce.Offset, "%s", ce.Msg)
		case err != nil:
			v.errf("schedule.cron", "%v", err)
		default:
			v.a.temporalCron = t
		}
	}
	if sc.Timezone != "" {
		if sc.Timezone == "Local" {
			v.errf("schedule.timezone", "timezone \"Local\" depends on the machine; use an IANA name like \"Europe/Berlin\" or \"UTC\"")
		} else if _, err := time.LoadLocation(sc.Timezone); err != nil {
			v.errf("schedule.timezone", "unknown timezone %q: want an IANA name like \"America/Los_Angeles\" or \"UTC\"", sc.Timezone)
		}
	}
}

func (v *validator) checkNotify() {
	if v.s.Notify == nil {
		return
	}
	for i, w := range v.s.Notify.Webhooks {
		p := fmt.Sprintf("notify.webhooks[%d]", i)
		u, err := url.Parse(w)
		switch {
		case strings.Contains(w, "{{"):
			v.errf(p, "webhook URLs are literal; expressions are not evaluated here")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			v.errf(p, "invalid webhook URL %q: want an http:// or https:// URL", w)
		}
	}
}
