// Package spec reads agent workflow specs: parse (yaml.v3 nodes, so every
// problem has file:line:col) → validate (every problem at once, as an
// ErrorList) → compile (the Plan the engine runs). Load and LoadFile do all
// three and are the one entry point for the CLI and tests.
//
// The raw model (model.go) is the YAML format as written; its struct tags
// drive both the strict decoder and the JSON Schema (schema/, regenerated
// by `go generate ./internal/spec`).
//
// Built-in defaults, used when neither a step nor the spec's `defaults` set
// a value (field by field): timeout 10m, retries 0, cpu 1, memory 512Mi,
// disk 256Mi, pids 256, max_output 8Mi, gpu none; approval timeout 24h;
// workspace revision HEAD.
//
// Units: durations are Go syntax plus "d" (24h); sizes are bytes or
// Kubernetes-style quantities (Ki/Mi/Gi/Ti binary, K/M/G/T decimal; bare
// "m"/"g" are refused as ambiguous); CPU is cores ("1.5", 2) or milli-cores
// ("500m"); GPU is a whole count or "all".
package spec
