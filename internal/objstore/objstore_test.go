package objstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/exechost"
)

func TestCheckKey(t *testing.T) {
	for _, k := range []string{"a", "checkpoints/af-1.tar", "logs/agent%2Fx/run/step/1/chunk-000001", "a=b", "x.y-z_1"} {
		require.NoError(t, CheckKey(k), k)
	}
	for _, k := range []string{"", "/a", "a/", "a//b", ".", "..", "a/../b", "a/./b", ".tmp-1", "a/.hidden",
		"a b", "a\\b", "a\x00b", "ü", strings.Repeat("a", maxKeyLen+1)} {
		require.ErrorIs(t, CheckKey(k), ErrInvalidKey, "%q", k)
	}
}

func TestSubAndMem(t *testing.T) {
	ctx := context.Background()
	m := NewMem()
	s := Sub(Sub(m, "root/"), "cp")
	_, err := s.Put(ctx, "x.tar", strings.NewReader("hello"), PutOptions{})
	require.NoError(t, err)
	_, err = m.Stat(ctx, "root/cp/x.tar")
	require.NoError(t, err)
	_, err = s.Put(ctx, "x.tar", strings.NewReader("again"), PutOptions{IfAbsent: true})
	require.ErrorIs(t, err, ErrExists)
	infos, err := s.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.Equal(t, "x.tar", infos[0].Key)
	_, err = s.Get(ctx, "../x.tar")
	require.ErrorIs(t, err, ErrInvalidKey)
	require.Equal(t, "mem/root/cp", s.String())

	m.Fail = errors.New("connection refused")
	_, err = s.Stat(ctx, "x.tar")
	require.ErrorIs(t, err, ErrUnavailable)
	require.ErrorIs(t, err, exechost.ErrStoreUnavailable)
	var ue *UnavailableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, "object store mem unavailable: stat root/cp/x.tar: connection refused", err.Error())
}

func TestEscapeSegment(t *testing.T) {
	for _, s := range []string{"", "a", "agent/1", "..", ".hidden", "a.b", "x%41", "=", "ü日本", "a b\x00", strings.Repeat("/", 10)} {
		e := EscapeSegment(s)
		require.NoError(t, CheckKey(e), "%q → %q", s, e)
		require.NotContains(t, e, "/")
		require.Equal(t, s, UnescapeSegment(e), "%q → %q", s, e)
	}
	require.NotEqual(t, EscapeSegment("%41"), EscapeSegment("A"))
}
