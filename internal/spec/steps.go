package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/exechost"
	"github.com/agentflow/agentflow/internal/expr"
)

type templateUse int

const (
	useInput templateUse = iota
	useIf
	useEnv
	useOutput
)

// stepFields are what a step exposes to expressions: .steps.X.output... and
// .steps.X.status. Anything else would silently evaluate to null.
var stepFields = []string{"output", "status"}

type edge struct{ from, to int }

type edgeSite struct {
	path string
	off  int // -1: the value node itself
}

func (v *validator) checkSteps(inputs, secrets map[string]bool) {
	steps := v.s.Steps
	v.a.steps = make([]stepFacts, len(steps))
	// IDs first: expressions and depends_on may refer forward.
	for i, st := range steps {
		p := fmt.Sprintf("steps[%d].id", i)
		if !v.has(p) {
			continue
		}
		switch {
		case !stepIDRe.MatchString(st.ID):
			v.errf(p, "invalid step id %q: want lowercase letters, digits and '_'", st.ID)
		case len(st.ID) > maxIDLen:
			v.errf(p, "step id %q is longer than %d characters", st.ID, maxIDLen)
		}
		if j, dup := v.ids[st.ID]; dup {
			v.errf(p, "duplicate step id %q (first used by steps[%d])", st.ID, j)
			continue
		}
		v.ids[st.ID] = i
	}
	if d := v.s.Defaults; d != nil && v.has("defaults.egress") {
		v.a.defaultEgress = v.checkEgress("defaults.egress", d.Egress, secrets)
	}
	edges := map[edge]edgeSite{}
	deps := make([][]int, len(steps))
	for i := range steps {
		v.checkStep(i, inputs, secrets, edges, &deps[i])
	}
	v.checkCycles(deps, edges)
}

func (v *validator) stepNames() []string {
	names := make([]string, 0, len(v.s.Steps))
	for _, st := range v.s.Steps {
		names = append(names, st.ID)
	}
	return names
}

func (v *validator) didYouMean(s string, candidates func() []string) string {
	if v.full() {
		return "" // the message is dropped anyway; skip the O(steps) search
	}
	return didYouMean(s, candidates())
}

func didYouMean(s string, candidates []string) string {
	if c := suggest(s, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

func (v *validator) checkStep(i int, inputs, secrets map[string]bool, edges map[edge]edgeSite, deps *[]int) {
	st := &v.s.Steps[i]
	facts := &v.a.steps[i]
	p := fmt.Sprintf("steps[%d]", i)

	var kinds []string
	for _, k := range []string{"tool", "image", "approval"} {
		if v.has(p + "." + k) {
			kinds = append(kinds, k)
		}
	}
	switch len(kinds) {
	case 0:
		v.errf(p, "step %q needs exactly one of tool, image or approval", st.ID)
	case 1:
	default:
		v.errKey(p+"."+kinds[1], "step %q sets both %s and %s; use exactly one of tool, image or approval", st.ID, kinds[0], kinds[1])
	}
	if v.has(p+".tool") && !toolRe.MatchString(st.Tool) {
		v.errf(p+".tool", "invalid tool %q: want name:version of a registered tool, e.g. imap-fetcher:1.2", st.Tool)
	}
	if v.has(p + ".image") {
		switch err := exechost.CheckPinnedImage(st.Image); {
		case errors.Is(err, exechost.ErrUnpinnedImage):
			v.errf(p+".image", "image %q is not pinned: use repo@sha256:<64 hex> or a local image ID sha256:<64 hex> (or register a tool with --pin)", st.Image)
		case err != nil:
			v.errf(p+".image", "%v", err)
		}
	}

	// Dependencies: explicit first.
	seen := map[string]bool{}
	for j, d := range st.DependsOn {
		dp := fmt.Sprintf("%s.depends_on[%d]", p, j)
		idx, ok := v.ids[d]
		switch {
		case d == st.ID:
			v.errf(dp, "step %q depends on itself", st.ID)
		case !ok:
			v.errf(dp, "unknown step %q in depends_on%s", d, v.didYouMean(d, v.stepNames))
		case seen[d]:
			v.errf(dp, "step %q is listed twice in depends_on", d)
		default:
			*deps = append(*deps, idx)
			if _, dup := edges[edge{i, idx}]; !dup {
				edges[edge{i, idx}] = edgeSite{path: dp, off: -1}
			}
		}
		seen[d] = true
	}

	// Expressions: inputs, if, env (in that order; implicit dependencies in
	// first-reference order).
	ctx := &stepCtx{idx: i, facts: facts, edges: edges, deps: deps, explicit: seen}
	v.walkStrings(p+".inputs", anyMap(st.Inputs), func(path, s string) {
		v.checkTemplate(path, s, useInput, i, inputs, secrets, ctx)
	})
	if v.has(p + ".if") {
		if strings.TrimSpace(st.If) == "" {
			v.errf(p+".if", "if must not be empty")
		} else {
			v.checkTemplate(p+".if", st.If, useIf, i, inputs, secrets, ctx)
		}
	}
	for _, k := range v.s.order[p+".env"] {
		kp := childPath(p+".env", k)
		// The name and value rules are the sandbox's own (exechost): what
		// passes here passes every host, and the other way round.
		switch {
		case !exechost.ValidEnvName(k):
			v.errKey(kp, "invalid env name %q: want letters, digits and '_', not starting with a digit", k)
		case exechost.ChoosesCode(k):
			v.errKey(kp, "env %q chooses which code runs (dynamic loader, PATH, shell start-up or runtime injection) and is refused; configure the tool through its inputs", k)
		case exechost.ChoosesDevices(k):
			v.errKey(kp, "env %q chooses which host devices the GPU runtime attaches and is refused; request GPUs with resources.gpu", k)
		}
		t := v.checkTemplate(kp, st.Env[k], useEnv, i, inputs, secrets, ctx)
		if t == nil {
			continue
		}
		if _, isSecret := t.SecretName(); !isSecret {
			if LooksSecret(k) {
				v.errKey(kp, "env %q looks like a secret: plain values are refused, set it to \"{{ .secrets.NAME }}\" and declare the secret", k)
			} else if kind := exechost.CredentialKind(st.Env[k]); kind != "" {
				v.errf(kp, "env %q: the value looks like a credential (%s): declare it under secrets: and set the env to \"{{ .secrets.NAME }}\"", k, kind)
			}
		}
	}

	// Limits.
	facts.timeout, facts.retries, facts.res = v.a.defaultTimeout, v.a.defaultRetries, v.a.defaultRes
	if st.Approval != nil {
		for _, f := range []string{"inputs", "env", "resources", "retries", "timeout", "egress"} {
			if v.has(p + "." + f) {
				msg := fmt.Sprintf("approval step %q takes no %s", st.ID, f)
				if f == "timeout" {
					msg += "; set approval.timeout"
				}
				v.errKey(p+"."+f, "%s", msg)
			}
		}
		ap := p + ".approval"
		if v.has(ap+".prompt") && strings.TrimSpace(st.Approval.Prompt) == "" {
			v.errf(ap+".prompt", "approval prompt must not be empty")
		}
		facts.approval = DefaultApprovalTimeout
		if v.has(ap + ".timeout") {
			facts.approval = v.checkDuration(ap+".timeout", st.Approval.Timeout, MaxApprovalWait, DefaultApprovalTimeout)
		}
		return
	}
	if v.has(p + ".timeout") {
		facts.timeout = v.checkDuration(p+".timeout", st.Timeout, MaxStepTimeout, facts.timeout)
	}
	if st.Retries != nil {
		facts.retries = v.checkRetries(p+".retries", *st.Retries)
	}
	facts.res = v.checkResources(p+".resources", st.Resources, facts.res)

	// Egress: the step's own list replaces the default one; `egress: []`
	// opts a step out of defaults.egress (no network).
	facts.egress = v.a.defaultEgress
	if v.has(p + ".egress") {
		facts.egress = v.checkEgress(p+".egress", st.Egress, secrets)
	}
	for _, n := range facts.egress.secrets {
		if !slices.Contains(facts.secrets, n) {
			facts.secrets = append(facts.secrets, n)
		}
	}
	if len(facts.egress.rules) == 0 && v.has(p+".resources.max_egress") {
		v.errKey(p+".resources.max_egress", "max_egress bounds the egress proxy: step %q declares no egress", st.ID)
	}
}

func anyMap(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

// walkStrings calls fn for every string in a JSON-like value, maps in source order.
func (v *validator) walkStrings(path string, val any, fn func(path, s string)) {
	switch x := val.(type) {
	case string:
		fn(path, x)
	case []any:
		for i, e := range x {
			v.walkStrings(fmt.Sprintf("%s[%d]", path, i), e, fn)
		}
	case map[string]any:
		keys := v.s.order[path]
		if len(keys) != len(x) { // built programmatically: fall back to sorted order
			keys = make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
		}
		for _, k := range keys {
			v.walkStrings(childPath(path, k), x[k], fn)
		}
	}
}

type stepCtx struct {
	idx      int
	facts    *stepFacts
	edges    map[edge]edgeSite
	deps     *[]int
	explicit map[string]bool
}

// checkTemplate parses one string and checks its references. It returns
// the template, or nil when it does not parse.
func (v *validator) checkTemplate(path, src string, use templateUse, stepIdx int, inputs, secrets map[string]bool, ctx *stepCtx) *expr.Template {
	t, err := expr.Parse(src)
	if err != nil {
		var se *expr.SyntaxError
		if errors.As(err, &se) {
			v.errOffset(path, se.Offset, "invalid expression: %s", se.Msg)
		} else {
			v.errf(path, "invalid expression: %v", err)
		}
		return nil
	}
	if use == useIf && !t.IsSingleExpr() {
		v.errf(path, "if must be a single {{ }} expression, e.g. \"{{ .steps.x.status == 'success' }}\"")
	}
	for _, r := range t.Refs() {
		switch r.Root {
		case "steps":
			idx, ok := v.ids[r.Name]
			switch {
			case !ok:
				v.errOffset(path, r.Offset, "unknown step %q%s", r.Name, v.didYouMean(r.Name, v.stepNames))
			case idx == stepIdx:
				v.errOffset(path, r.Offset, "step %q references itself", r.Name)
			case len(r.Path) > 0 && !slices.Contains(stepFields, r.Path[0]):
				v.errOffset(path, r.Offset, "unknown field %q of step %q: a step has .output and .status%s", r.Path[0], r.Name, didYouMean(r.Path[0], stepFields))
			case ctx != nil:
				if !slices.Contains(ctx.facts.implicit, r.Name) && !ctx.explicit[r.Name] {
					ctx.facts.implicit = append(ctx.facts.implicit, r.Name)
					*ctx.deps = append(*ctx.deps, idx)
				}
				if _, dup := ctx.edges[edge{ctx.idx, idx}]; !dup {
					ctx.edges[edge{ctx.idx, idx}] = edgeSite{path: path, off: r.Offset}
				}
			}
		case "inputs":
			if !inputs[r.Name] {
				v.errOffset(path, r.Offset, "unknown input %q%s", r.Name, v.didYouMean(r.Name, func() []string { return keysOf(inputs) }))
			}
		case "secrets":
			if !secrets[r.Name] {
				v.errOffset(path, r.Offset, "unknown secret %q (declare it under secrets)%s", r.Name, v.didYouMean(r.Name, func() []string { return keysOf(secrets) }))
			}
			switch use {
			case useIf:
				v.errOffset(path, r.Offset, "secrets cannot be used in if")
			case useOutput:
				v.errOffset(path, r.Offset, "secrets cannot be used in outputs: their values never leave the worker")
			default:
				if _, whole := t.SecretName(); !whole {
					v.errOffset(path, r.Offset, "a secret must be the whole string value, exactly \"{{ .secrets.%s }}\" (no surrounding text or filters)", r.Name)
				} else if ctx != nil && !slices.Contains(ctx.facts.secrets, r.Name) {
					ctx.facts.secrets = append(ctx.facts.secrets, r.Name)
				}
			}
		default:
			v.errOffset(path, r.Offset, "unknown reference root %q (want .inputs, .steps or .secrets)", r.Root)
		}
	}
	return t
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkCycles reports every distinct cycle found by a depth-first search
// in step order (at most 10), each once, rotated to start at its earliest
// step, at the place that creates its first edge.
func (v *validator) checkCycles(deps [][]int, edges map[edge]edgeSite) {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(deps))
	var stack []int
	reported := map[string]bool{}
	var visit func(int)
	visit = func(n int) {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range deps[n] {
			switch color[m] {
			case white:
				visit(m)
			case grey:
				start := slices.Index(stack, m)
				cyc := slices.Clone(stack[start:])
				// rotate so the earliest step comes first
				minAt := 0
				for k, x := range cyc {
					if x < cyc[minAt] {
						minAt = k
					}
				}
				cyc = append(cyc[minAt:], cyc[:minAt]...)
				names := make([]string, 0, len(cyc)+1)
				for _, x := range cyc {
					names = append(names, v.s.Steps[x].ID)
				}
				names = append(names, names[0])
				key := strings.Join(names, " ")
				if reported[key] || len(reported) >= 10 {
					continue
				}
				reported[key] = true
				ce := &CycleError{Path: names}
				to := cyc[0]
				if len(cyc) > 1 {
					to = cyc[1]
				}
				site := edges[edge{cyc[0], to}]
				n := v.s.nodeAt(site.path)
				e := &Error{File: v.s.File, Line: 1, Col: 1, Path: site.path, Msg: ce.Error(), Cause: ce}
				if n != nil {
					e.Line, e.Col = n.Line, n.Column
					if site.off >= 0 {
						e.Line, e.Col = scalarOffsetPos(v.s.sourceLines(), n, site.off)
					}
				}
				v.add(e)
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
	}
	for n := range deps {
		if color[n] == white {
			visit(n)
		}
	}
}
