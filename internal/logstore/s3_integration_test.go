//go:build integration

package logstore

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/testenv"
)

// TestBackendsS3 runs the backend cases on a real MinIO, through
// objstore.Open as a worker and agentctl open --store.
func TestBackendsS3(t *testing.T) {
	m := testenv.MinIO(t)
	var n atomic.Int64
	backendCases(t, func(t *testing.T) objstore.Store {
		root, err := objstore.Open(t.Context(), m.StoreURL(fmt.Sprintf("logs-it/%d", n.Add(1))), m.Getenv)
		require.NoError(t, err)
		return objstore.Sub(root, Prefix)
	})
}
