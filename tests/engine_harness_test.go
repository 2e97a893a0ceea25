//go:build e2e

package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/spec"
	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/worker"
	"github.com/agentflow/agentflow/workflows"
)

// The engine end-to-end suite runs a real Temporal dev server (started
// here on free, non-default ports, so concurrent runs of the suite do not
// collide), an in-process worker with the real Docker host, and the tool
// images built by tools/build-images.sh.

// engineFreePort asks the kernel for a free port. Another process could
// take it before the server binds it; devserver.Start then fails clearly.
func engineFreePort(t *testing.T) int { return testenv.FreePort(t) }

// engineEnv is shared by the subtests of one TestEngine* function.
type engineEnv struct {
	client   client.Client
	docker   *dockerclient.Client
	images   map[string]string // tool name → image ID
	logDir   string
	runLabel string // value of agentflow.e2e on every sandbox of this suite
	metrics  string // worker metrics address
	health   string // worker health address
	address  string // Temporal frontend
	tmp      string
	// secretRoot is the worker's --secret-file-root: file:// secrets of
	// the suite live here.
	secretRoot string
}

// engineRequire skips (or fails, under AGENTFLOW_REQUIRE_DOCKER=1) when a
// prerequisite is missing.
func engineRequire(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	testenv.Need(t, ok, format, args...)
}

func repoRoot(t *testing.T) string { return testenv.RepoRoot(t) }

type imageEntry struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Tag     string `json:"tag"`
	ID      string `json:"id"`
}

func loadImages(t *testing.T, root string, need ...string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, ".data", "images.json"))
	engineRequire(t, err == nil, "no .data/images.json (run tools/build-images.sh): %v", err)
	var entries []imageEntry
	require.NoError(t, json.Unmarshal(b, &entries))
	out := map[string]string{}
	for _, e := range entries {
		out[e.Name] = e.ID
	}
	for _, n := range need {
		engineRequire(t, out[n] != "", "image for tool %s missing from .data/images.json", n)
	}
	return out
}

// startEngine brings up Docker check, dev server and worker; everything is
// torn down with t.Cleanup.
func startEngine(t *testing.T) *engineEnv { return startEngineWith(t, nil) }

// startEngineWith is startEngine with the worker's configuration adjusted
// by mutate (e.g. a shared --store) before it starts.
func startEngineWith(t *testing.T, mutate func(*worker.Config)) *engineEnv {
	t.Helper()
	root := repoRoot(t)

	dc := testenv.Docker(t)
	bin := testenv.TemporalBinary(t)

	images := loadImages(t, root, "echo", "wsfile", "testtool")

	tmp := t.TempDir()
	env := &engineEnv{
		tmp:      tmp,
		docker:   dc,
		images:   images,
		logDir:   filepath.Join(tmp, "logs"),
		runLabel: fmt.Sprintf("engine-%d-%d", os.Getpid(), time.Now().UnixNano()),
	}
	// The worker resolves only what its operator allows: the e2e secrets
	// are AF_E2E_* variables and files under <tmp>/secrets.
	env.secretRoot = filepath.Join(tmp, "secrets")
	require.NoError(t, os.MkdirAll(env.secretRoot, 0o700))
	cfg := worker.Config{
		SecretPolicy:       secrets.Policy{EnvAllow: []string{"AF_E2E_*"}, FileRoots: []string{env.secretRoot}},
		HealthAddr:         "127.0.0.1:0",
		MetricsAddr:        "127.0.0.1:0",
		MaxConcurrentSteps: 4,
		CheckpointDir:      filepath.Join(tmp, "checkpoints"),
		LogDir:             env.logDir,
		StopTimeout:        10 * time.Second,
		SandboxLabels:      map[string]string{"agentflow.test": "1", "agentflow.e2e": env.runLabel},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	st := startStack(t, bin, tmp, cfg, func() { env.requireNoContainers(t, "") })
	env.address, env.client = st.address, st.client
	env.health, env.metrics = st.ready.HealthAddr, st.ready.MetricsAddr
	return env
}

var engineResources = spec.Resources{
	NanoCPUs: 500_000_000, MemoryBytes: 128 << 20, DiskBytes: 32 << 20, Pids: 128, MaxOutputBytes: 4 << 20,
}

func (e *engineEnv) step(id, tool string, inputs map[string]any, deps ...string) spec.PlanStep {
	return spec.PlanStep{
		ID:                id,
		Tool:              tool + ":e2e",
		Image:             e.images[tool],
		Inputs:            inputs,
		DependsOn:         deps,
		ExplicitDependsOn: deps,
		Timeout:           90 * time.Second,
		Resources:         engineResources,
	}
}

func plan(name string, steps ...spec.PlanStep) spec.Plan {
	return spec.Plan{SchemaVersion: spec.PlanSchemaVersion, Name: name, Version: "1.0.0", Steps: steps}
}

// start submits a plan as the CLI does.
func (e *engineEnv) start(t *testing.T, id string, p spec.Plan, inputs map[string]any) client.WorkflowRun {
	t.Helper()
	return e.startOn(t, workflows.TaskQueue, id, p, inputs)
}

func (e *engineEnv) startOn(t *testing.T, taskQueue, id string, p spec.Plan, inputs map[string]any) client.WorkflowRun {
	t.Helper()
	run, err := e.client.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{
		ID:        id,
		TaskQueue: taskQueue,
		Memo:      map[string]any{workflows.MemoSpecName: p.Name, workflows.MemoSpecVersion: p.Version},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrAgentName).ValueSet(id),
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrSpec).ValueSet(p.Name),
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrStatus).ValueSet(workflows.RunPending),
		),
	}, workflows.WorkflowName, workflows.Input{Plan: p, Inputs: inputs})
	require.NoError(t, err)
	return run
}

func (e *engineEnv) status(t *testing.T, id string) workflows.Status {
	t.Helper()
	v, err := e.client.QueryWorkflow(t.Context(), id, "", workflows.StatusQuery)
	require.NoError(t, err)
	var st workflows.Status
	require.NoError(t, v.Get(&st))
	return st
}

func stepRecord(t *testing.T, st workflows.Status, id string) workflows.StepRecord {
	t.Helper()
	for _, r := range st.StepHistory {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("step %s not in status", id)
	return workflows.StepRecord{}
}

// wait returns the run's result within a bound generous enough for a
// loaded 2-core machine.
func (e *engineEnv) wait(t *testing.T, run client.WorkflowRun) (*workflows.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var res workflows.Result
	err := run.Get(ctx, &res)
	return &res, err
}

// containers lists this suite's sandboxes (of one agent when agentID != "").
func (e *engineEnv) containers(t *testing.T, agentID string) []container.Summary {
	t.Helper()
	f := filters.NewArgs(filters.Arg("label", "agentflow.e2e="+e.runLabel))
	if agentID != "" {
		f.Add("label", "agentflow.agent_id="+agentID)
	}
	list, err := e.docker.ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
	require.NoError(t, err)
	return list
}

func (e *engineEnv) requireNoContainers(t *testing.T, agentID string) {
	t.Helper()
	// Removal is asynchronous in the daemon (AutoRemove); poll briefly for
	// the condition rather than sleeping.
	require.Eventually(t, func() bool { return len(e.containers(t, agentID)) == 0 }, 20*time.Second, 200*time.Millisecond,
		"sandboxes left behind for %q", agentID)
}

// historyBytes is the whole history of a run in protobuf wire format:
// strings and payload data appear there verbatim (protojson would base64
// the payloads and hide a leaked value from a grep).
func (e *engineEnv) historyBytes(t *testing.T, id, runID string) []byte {
	t.Helper()
	it := e.client.GetWorkflowHistory(t.Context(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []byte
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		b, err := proto.Marshal(ev)
		require.NoError(t, err)
		out = append(out, b...)
	}
	require.NotEmpty(t, out)
	return out
}

// historyText is the whole history of a run as JSON text.
func (e *engineEnv) historyText(t *testing.T, id, runID string) string {
	t.Helper()
	it := e.client.GetWorkflowHistory(t.Context(), id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var b strings.Builder
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		j, err := protojson.Marshal(ev)
		require.NoError(t, err)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}
