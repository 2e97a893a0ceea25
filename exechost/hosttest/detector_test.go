package hosttest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The overlap detector is a tripwire behind e.mu, so the contract suite can
// never trigger it; check here that it would fire.
func TestOverlapDetectorFires(t *testing.T) {
	f, err := NewFake(Options{})
	require.NoError(t, err)
	e := &execution{}
	leave := f.enter(e)
	require.Zero(t, f.Stats().Overlaps)
	leaveAgain := f.enter(e) // a second caller without the lock
	require.Equal(t, 1, f.Stats().Overlaps)
	leaveAgain()
	leave()
	f.enter(e)()
	require.Equal(t, 1, f.Stats().Overlaps, "sequential calls are not overlaps")
}
