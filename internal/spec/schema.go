package spec

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

//go:generate go run ./schemagen -o ../../schema/agentflow.schema.json

// SchemaID is the $id of the published JSON Schema.
const SchemaID = "https://github.com/agentflow/agentflow/schema/agentflow.schema.json"

// JSONSchema returns the JSON Schema (draft-07, the dialect
// yaml-language-server supports best) of the spec format, generated from
// the raw model's struct tags so it cannot drift from the decoder. It is
// for editors: completion, hover docs and early checks. Validate stays the
// authority (expressions, references, cycles, units are beyond a schema).
func JSONSchema() ([]byte, error) {
	g := &schemaGen{defs: map[string]any{}}
	root := g.structSchema(reflect.TypeFor[Spec]())
	root["$schema"] = "http://json-schema.org/draft-07/schema#"
	root["$id"] = SchemaID
	root["title"] = "agentflow spec"
	root["description"] = "A durable, sandboxed AI-agent workflow: steps run digest-pinned tools in hardened Docker sandboxes, orchestrated by Temporal."
	root["definitions"] = g.defs
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

type schemaGen struct{ defs map[string]any }

func (g *schemaGen) typeSchema(t reflect.Type) map[string]any {
	switch {
	case t == quantityType:
		return map[string]any{"type": []string{"string", "number"}}
	case t == egressType:
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "string", "pattern": `^(\*\.)?[a-z0-9.-]+:[0-9]+$`},
			g.ref(t),
		}}
	case t == inputListType:
		return map[string]any{"anyOf": []any{
			map[string]any{"type": "array", "items": g.ref(reflect.TypeFor[Input]())},
			map[string]any{"type": "object", "maxProperties": 0},
		}}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.typeSchema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int:
		return map[string]any{"type": "integer"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.typeSchema(t.Elem())}
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": []string{"string", "number", "boolean"}}}
		}
		return map[string]any{"type": "object"}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		return g.ref(t)
	}
	panic("spec: schema for " + t.String())
}

func (g *schemaGen) ref(t reflect.Type) map[string]any {
	if _, ok := g.defs[t.Name()]; !ok {
		g.defs[t.Name()] = nil // reserve: breaks recursion
		g.defs[t.Name()] = g.structSchema(t)
	}
	return map[string]any{"$ref": "#/definitions/" + t.Name()}
}

func (g *schemaGen) structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("yaml")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		s := g.typeSchema(f.Type)
		if _, isRef := s["$ref"]; isRef {
			// draft-07 ignores siblings of $ref: wrap to keep the description
			s = map[string]any{"allOf": []any{s}}
		}
		if d := f.Tag.Get("doc"); d != "" {
			s["description"] = d
		}
		if p := f.Tag.Get("pattern"); p != "" {
			s["pattern"] = p
		}
		if e := f.Tag.Get("enum"); e != "" {
			s["enum"] = strings.Split(e, ",")
		}
		if m := f.Tag.Get("min"); m != "" {
			n, _ := strconv.Atoi(m)
			s["minimum"] = n
		}
		if m := f.Tag.Get("max"); m != "" {
			n, _ := strconv.Atoi(m)
			s["maximum"] = n
		}
		if ex := f.Tag.Get("example"); ex != "" {
			s["examples"] = []string{ex}
		}
		props[name] = s
		if f.Tag.Get("required") == "true" {
			required = append(required, name)
		}
	}
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	if t == reflect.TypeFor[Step]() {
		out["oneOf"] = []any{
			map[string]any{"required": []string{"tool"}},
			map[string]any{"required": []string{"image"}},
			map[string]any{"required": []string{"approval"}},
		}
	}
	return out
}
