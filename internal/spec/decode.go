package spec

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// Limits of the decoder. Aliases are followed while walking the node tree
// (yaml.v3 keeps them as references, so parsing itself is linear); every
// visit counts against the budget, so a billion-laughs document stops after
// maxNodes visits instead of expanding.
const (
	maxNodes         = 100_000
	maxExpandedBytes = 4 << 20 // scalar bytes, counting each alias expansion again
	maxValueDepth    = 64
)

type decoder struct {
	s       *Spec
	nodes   int
	bytes   int
	stopped bool
	errs    ErrorList
	dropped bool // more than MaxErrors problems
}

// typeErr reports a value of the wrong type and marks its path bad.
func (d *decoder) typeErr(n *yaml.Node, path, format string, args ...any) {
	d.s.bad[path] = true
	d.errAt(n, path, format, args...)
}

func (d *decoder) errAt(n *yaml.Node, path, format string, args ...any) {
	if len(d.errs) >= MaxErrors {
		d.dropped = true
		return
	}
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Column
	}
	d.errs = append(d.errs, &Error{File: d.s.File, Line: line, Col: col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// resolve follows aliases and charges the budget. It returns nil once the
// budget is exhausted (an error has then been recorded).
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	if d.stopped || n == nil {
		return nil
	}
	orig := n
	for i := 0; n.Kind == yaml.AliasNode; i++ {
		if n.Alias == nil || i > 100 {
			d.errAt(orig, "", "unresolvable YAML alias")
			return nil
		}
		n = n.Alias
	}
	d.nodes++
	if n.Kind == yaml.ScalarNode {
		d.bytes += len(n.Value)
	}
	if d.nodes > maxNodes || d.bytes > maxExpandedBytes {
		d.stopped = true
		d.errs = append(d.errs, &Error{File: d.s.File, Line: orig.Line, Col: orig.Column,
			Msg:   fmt.Sprintf("document expands to more than %d nodes or %d bytes through aliases (alias bomb?)", maxNodes, maxExpandedBytes),
			Cause: &LimitError{Msg: "alias expansion limit exceeded"}})
		return nil
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!str":
			return "a string"
		default:
			return "a " + strings.TrimPrefix(n.ShortTag(), "!!")
		}
	}
	return "an unsupported node"
}

// refuseTag reports a custom (application-specific) YAML tag such as !step
// on any node: the spec format has no such tags, and a decoder that
// ignores one lets a spec mean something else to another YAML reader.
// Standard tags (!!str, !!int, …) and untagged nodes pass. The node is
// still decoded as if untagged, so the rest of the spec is checked too.
func (d *decoder) refuseTag(n *yaml.Node, path string) {
	if !strings.HasPrefix(n.ShortTag(), "!!") {
		d.errAt(n, path, "custom YAML tag %s is not supported: specs use plain YAML values", n.Tag)
		n.Tag = "" // reported once, also when an alias reaches it again
	}
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

var (
	quantityType  = reflect.TypeFor[Quantity]()
	inputListType = reflect.TypeFor[InputList]()
	egressType    = reflect.TypeFor[EgressEntry]()
)

// decode fills v from n. path names the field for error messages.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, depth int) {
	orig := n
	n = d.resolve(n)
	if n == nil {
		return
	}
	d.s.nodes[path] = n
	d.refuseTag(n, path)
	if depth > maxValueDepth {
		d.errAt(orig, path, "nesting deeper than %d levels", maxValueDepth)
		return
	}
	t := v.Type()
	if isNull(n) && t.Kind() != reflect.Interface {
		return // null means "not set" for typed fields
	}
	switch {
	case t == quantityType:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!str" && n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
			d.typeErr(orig, path, "expected a string or number, got %s", kindName(n))
			return
		}
		v.SetString(n.Value)
		return
	case t == egressType && n.Kind == yaml.ScalarNode:
		// The short form: "host:port".
		if n.ShortTag() != "!!str" {
			d.typeErr(orig, path, "expected \"host:port\" or {host, headers}, got %s", kindName(n))
			return
		}
		d.s.nodes[path+".host"] = n
		v.FieldByName("Host").SetString(n.Value)
		return
	case t == inputListType && n.Kind == yaml.MappingNode:
		if len(n.Content) != 0 {
			d.typeErr(orig, path, "expected a list of inputs ({name, type, ...}), got a non-empty mapping")
		}
		return
	}
	switch t.Kind() {
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			hint := ""
			if n.Kind == yaml.ScalarNode {
				hint = fmt.Sprintf(" (quote it: %q)", n.Value)
			}
			d.typeErr(orig, path, "expected a string, got %s%s", kindName(n), hint)
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.typeErr(orig, path, "expected a boolean, got %s", kindName(n))
			return
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			d.typeErr(orig, path, "invalid boolean %q", n.Value)
			return
		}
		v.SetBool(b)
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.typeErr(orig, path, "expected an integer, got %s", kindName(n))
			return
		}
		var i int
		if err := n.Decode(&i); err != nil {
			d.typeErr(orig, path, "invalid integer %q", n.Value)
			return
		}
		v.SetInt(int64(i))
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		d.decode(orig, p.Elem(), path, depth)
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(orig, n, v, path, depth)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.typeErr(orig, path, "expected a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.typeErr(orig, path, "expected a mapping, got %s", kindName(n))
			return
		}
		m := reflect.MakeMap(t)
		var keys []string
		d.entries(n, path, depth, func(key string, kn, vn *yaml.Node) {
			keys = append(keys, key)
			p := childPath(path, key)
			d.s.keys[p] = kn
			ev := reflect.New(t.Elem()).Elem()
			if t.Elem().Kind() == reflect.String {
				d.decodeFlexString(vn, ev, p)
			} else {
				d.decode(vn, ev, p, depth+1)
			}
			m.SetMapIndex(reflect.ValueOf(key), ev)
		})
		d.s.order[path] = keys
		v.Set(m)
	case reflect.Interface:
		if val := d.decodeAny(orig, path, depth); val != nil {
			v.Set(reflect.ValueOf(val))
		}
	default:
		panic("spec: decoder does not handle " + t.String())
	}
}

// decodeFlexString accepts any scalar for map[string]string values (env):
// `PORT: 8080` means the string "8080", as in docker-compose.
func (d *decoder) decodeFlexString(n *yaml.Node, v reflect.Value, path string) {
	orig := n
	n = d.resolve(n)
	if n == nil {
		return
	}
	d.s.nodes[path] = n
	if n.Kind != yaml.ScalarNode || isNull(n) {
		d.typeErr(orig, path, "expected a string, got %s", kindName(n))
		return
	}
	v.SetString(n.Value)
}

// decodeAny converts a free-form value to JSON data: nil, bool, float64,
// string, []any, map[string]any. Numbers become float64 right away so the
// Plan is identical before and after its JSON trip through Temporal history.
func (d *decoder) decodeAny(n *yaml.Node, path string, depth int) any {
	orig := n
	n = d.resolve(n)
	if n == nil {
		return nil
	}
	d.s.nodes[path] = n
	d.refuseTag(n, path)
	if depth > maxValueDepth {
		d.errAt(orig, path, "nesting deeper than %d levels", maxValueDepth)
		return nil
	}
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				d.typeErr(orig, path, "invalid boolean %q", n.Value)
			}
			return b
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil || i > 1<<53 || i < -(1<<53) {
				d.errAt(orig, path, "integer %s does not fit a JSON number exactly; quote it", n.Value)
				return nil
			}
			return float64(i)
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				d.errAt(orig, path, "%s is not a JSON number", n.Value)
				return nil
			}
			return f
		case "!!str", "!!timestamp", "!!binary":
			return n.Value
		default:
			d.errAt(orig, path, "unsupported YAML tag %s", n.Tag)
			return nil
		}
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			out = append(out, d.decodeAny(item, fmt.Sprintf("%s[%d]", path, i), depth+1))
		}
		return out
	case yaml.MappingNode:
		out := map[string]any{}
		var keys []string
		d.entries(n, path, depth, func(key string, kn, vn *yaml.Node) {
			p := childPath(path, key)
			d.s.keys[p] = kn
			keys = append(keys, key)
			out[key] = d.decodeAny(vn, p, depth+1)
		})
		d.s.order[path] = keys
		return out
	}
	d.errAt(orig, path, "unsupported YAML node")
	return nil
}

type fieldInfo struct {
	index    int
	name     string
	required bool
}

var fieldCache sync.Map // reflect.Type -> []fieldInfo

func structFields(t reflect.Type) []fieldInfo {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]fieldInfo)
	}
	var out []fieldInfo
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("yaml")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, fieldInfo{index: i, name: name, required: f.Tag.Get("required") == "true"})
	}
	fieldCache.Store(t, out)
	return out
}

// typeNoun names a struct for "unknown field ... in <noun>" messages.
var typeNoun = map[reflect.Type]string{
	reflect.TypeFor[Spec]():         "spec",
	reflect.TypeFor[Input]():        "input",
	reflect.TypeFor[Secret]():       "secret",
	reflect.TypeFor[Workspace]():    "workspace",
	reflect.TypeFor[GitSource]():    "workspace.git",
	reflect.TypeFor[Defaults]():     "defaults",
	reflect.TypeFor[Step]():         "step",
	reflect.TypeFor[ResourceSpec](): "resources",
	reflect.TypeFor[ApprovalSpec](): "approval",
	reflect.TypeFor[Output]():       "output",
	reflect.TypeFor[Schedule]():     "schedule",
	reflect.TypeFor[Notify]():       "notify",
}

func (d *decoder) decodeStruct(orig, n *yaml.Node, v reflect.Value, path string, depth int) {
	if n.Kind != yaml.MappingNode {
		d.typeErr(orig, path, "expected a mapping, got %s", kindName(n))
		return
	}
	fields := structFields(v.Type())
	seen := map[string]bool{}
	d.entries(n, path, depth, func(key string, kn, vn *yaml.Node) {
		for _, f := range fields {
			if f.name == key {
				seen[key] = true
				p := childPath(path, key)
				d.s.keys[p] = kn
				d.decode(vn, v.Field(f.index), p, depth+1)
				return
			}
		}
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.name
		}
		msg := fmt.Sprintf("unknown field %q in %s", key, typeNoun[v.Type()])
		if s := suggest(key, names); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		d.errAt(kn, path, "%s", msg)
	})
	if d.stopped {
		return
	}
	for _, f := range fields {
		if f.required && !seen[f.name] {
			d.errAt(orig, path, "missing required field %q in %s", f.name, typeNoun[v.Type()])
		}
	}
}

// entries calls fn for every key of a mapping in source order, refusing
// duplicate and non-string keys. YAML merge keys (<<: *anchor) are
// supported: explicit keys win over merged ones.
func (d *decoder) entries(n *yaml.Node, path string, depth int, fn func(key string, kn, vn *yaml.Node)) {
	seen := map[string]*yaml.Node{}
	var merged []*yaml.Node // key/value pairs from merge keys
	for i := 0; i+1 < len(n.Content) && !d.stopped; i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		kr := d.resolve(kn)
		if kr == nil {
			return
		}
		if kr.Kind != yaml.ScalarNode {
			d.errAt(kn, path, "mapping keys must be strings, got %s", kindName(kr))
			continue
		}
		d.refuseTag(kr, path)
		if kr.ShortTag() == "!!merge" {
			merged = append(merged, d.mergeEntries(vn, path, depth)...)
			continue
		}
		if prev, dup := seen[kr.Value]; dup {
			d.errAt(kn, path, "duplicate key %q (first defined at line %d)", kr.Value, prev.Line)
			continue
		}
		seen[kr.Value] = kn
		fn(kr.Value, kn, vn)
	}
	for i := 0; i+1 < len(merged) && !d.stopped; i += 2 {
		kn, vn := merged[i], merged[i+1]
		if _, explicit := seen[kn.Value]; explicit {
			continue
		}
		seen[kn.Value] = kn
		fn(kn.Value, kn, vn)
	}
}

func (d *decoder) mergeEntries(vn *yaml.Node, path string, depth int) []*yaml.Node {
	if depth > maxValueDepth {
		d.errAt(vn, path, "merge keys nested deeper than %d levels", maxValueDepth)
		return nil
	}
	r := d.resolve(vn)
	if r == nil {
		return nil
	}
	switch r.Kind {
	case yaml.MappingNode:
		var out []*yaml.Node
		d.entries(r, path, depth+1, func(key string, kn, v *yaml.Node) {
			out = append(out, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Line: kn.Line, Column: kn.Column}, v)
		})
		return out
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, item := range r.Content {
			out = append(out, d.mergeEntries(item, path, depth+1)...)
		}
		return out
	}
	d.errAt(vn, path, "merge key (<<) needs a mapping or a list of mappings, got %s", kindName(r))
	return nil
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// childPath appends a map key to a field path: a.b, or a["odd key"].
func childPath(parent, key string) string {
	if !identRe.MatchString(key) {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}
