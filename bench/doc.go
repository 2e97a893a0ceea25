// Package bench holds benchmarks that compare agentflow against a baseline
// measured in the same run. Heavy ones are gated by AGENTFLOW_BENCH=1 and
// run by `make bench`; results are recorded in docs/BENCHMARKS.md.
package bench
