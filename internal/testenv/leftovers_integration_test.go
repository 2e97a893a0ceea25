//go:build integration

package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"
)

const baseImage = "agentflow/base:latest"

// scopeFor is a label no other suite uses.
func scopeFor(t *testing.T) string {
	return fmt.Sprintf("agentflow.test.suite=testenv-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// createContainer creates (does not start) a container carrying labels and
// removes it when t ends; remove removes it earlier.
func createContainer(t *testing.T, c *client.Client, labels map[string]string) (id string, remove func()) {
	t.Helper()
	_, _, err := c.ImageInspectWithRaw(t.Context(), baseImage)
	Need(t, err == nil, "image %s missing (make images): %v", baseImage, err)
	cr, err := c.ContainerCreate(t.Context(), &container.Config{Image: baseImage, Labels: labels, Entrypoint: []string{"true"}}, nil, nil, nil, "")
	require.NoError(t, err)
	remove = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		_ = c.ContainerRemove(ctx, cr.ID, container.RemoveOptions{Force: true})
	}
	t.Cleanup(remove)
	return cr.ID, remove
}

func labelMap(kv ...string) map[string]string {
	m := map[string]string{"agentflow.test": "1"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestTrackerCountsOnlyWhatWasCreatedDuringTheRun(t *testing.T) {
	c := Docker(t)
	scope := scopeFor(t)
	suite := scope[len("agentflow.test.suite="):]
	labels := labelMap("agentflow.managed", "true", "agentflow.test.suite", suite)

	stale, _ := createContainer(t, c, labels) // exists before: never a leftover
	tr, err := Track(t.Context(), c, ManagedLabel, scope)
	require.NoError(t, err)

	left, err := tr.Leftovers(t.Context())
	require.NoError(t, err)
	require.Empty(t, left)

	// Outside the scope (another suite's, or not managed): not ours.
	createContainer(t, c, labelMap("agentflow.managed", "true", "agentflow.test.suite", suite+"-other"))
	createContainer(t, c, labelMap("agentflow.test.suite", suite))

	leaked, remove := createContainer(t, c, labels)
	nw, err := c.NetworkCreate(t.Context(), "af-testenv-"+suite, network.CreateOptions{Labels: labels})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.NetworkRemove(context.WithoutCancel(t.Context()), nw.ID) })

	left, err = tr.Leftovers(t.Context())
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"container/" + short(leaked), "network/" + short(nw.ID)}, kinds(left))
	require.NotContains(t, kinds(left), "container/"+short(stale))

	remove()
	require.NoError(t, c.NetworkRemove(t.Context(), nw.ID))
	left, err = tr.Leftovers(t.Context())
	require.NoError(t, err)
	require.Empty(t, left)
}

func kinds(l []Leftover) []string {
	var out []string
	for _, x := range l {
		out = append(out, x.Kind+"/"+x.ID)
	}
	return out
}

// Main's wrapper fails a passing run that leaks, prints what leaked, and
// keeps a failing run's code.
func TestMainFailsOnLeak(t *testing.T) {
	c := Docker(t)
	scope := scopeFor(t)
	suite := scope[len("agentflow.test.suite="):]
	var leaked string
	var stderr bytes.Buffer
	code := mainWith(func() int {
		leaked, _ = createContainer(t, c, labelMap("agentflow.test.suite", suite))
		return 0
	}, &stderr, scope)
	require.Equal(t, 1, code)
	require.Contains(t, stderr.String(), "LEFTOVER container "+short(leaked))

	stderr.Reset()
	require.Equal(t, 0, mainWith(func() int { return 0 }, &stderr, scope), stderr.String())
	require.Equal(t, 3, mainWith(func() int { return 3 }, &stderr, scope))
}
