package objstore_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/objstore"
)

func TestOpenDir(t *testing.T) {
	dir := t.TempDir()
	noEnv := func(string) string { return "" }
	for _, spec := range []string{"file://" + dir + "/a", dir + "/b", "file://localhost" + dir + "/c"} {
		s, err := objstore.Open(t.Context(), spec, noEnv)
		require.NoError(t, err, spec)
		require.IsType(t, &objstore.Dir{}, s)
	}
	t.Chdir(dir)
	s, err := objstore.Open(t.Context(), "rel/dir", noEnv)
	require.NoError(t, err)
	require.Equal(t, "dir "+filepath.Join(dir, "rel", "dir"), s.String())
}

func TestOpenBadSpecs(t *testing.T) {
	env := func(string) string { return "" }
	for _, tc := range []struct {
		spec, want string
	}{
		{spec: "", want: "empty location"},
		{spec: "gs://bucket", want: "unsupported scheme"},
		{spec: "S3://bucket", want: "unsupported scheme"},
		{spec: "file://relative/path", want: "want file:///absolute/path"},
		{spec: "file:///x?y=1", want: "want file:///absolute/path"},
		{spec: "s3://", want: "want s3://BUCKET[/PREFIX]"},
		{spec: "s3://user:pw@bucket/p", want: "want s3://BUCKET[/PREFIX]"},
		{spec: "s3://bucket:9000/p", want: "want s3://BUCKET[/PREFIX]"},
		{spec: "s3://bucket/p?x=1", want: "want s3://BUCKET[/PREFIX]"},
		{spec: "s3://Bad_Bucket/p", want: "s3 bucket"},
		{spec: "s3://bucket/a/../b", want: "s3 prefix"},
		{spec: "s3://bucket/a b", want: "s3 prefix"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			_, err := objstore.Open(t.Context(), tc.spec, env)
			require.ErrorContains(t, err, tc.want)
			if tc.spec != "" {
				require.ErrorContains(t, err, tc.spec, "the error names the spec")
			}
		})
	}
	_, err := objstore.Open(t.Context(), "s3://bucket", func(k string) string {
		if k == "AWS_ENDPOINT_URL" {
			return "ftp://host"
		}
		return ""
	})
	require.ErrorContains(t, err, "s3 endpoint")
}
