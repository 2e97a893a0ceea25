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

func TestOpenS3Environment(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want objstore.S3Config
	}{
		{
			name: "AWS defaults",
			env:  map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "ST"},
			want: objstore.S3Config{Bucket: "bkt", Prefix: "a/b", Region: "us-east-1", AccessKey: "AK", SecretKey: "SK", SessionToken: "ST"},
		},
		{
			name: "service endpoint and region win",
			env: map[string]string{"AWS_ENDPOINT_URL_S3": "http://s3:9000", "AWS_ENDPOINT_URL": "http://other",
				"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2"},
			want: objstore.S3Config{Bucket: "bkt", Prefix: "a/b", Endpoint: "http://s3:9000", Region: "eu-west-1"},
		},
		{
			name: "general endpoint, default region",
			env:  map[string]string{"AWS_ENDPOINT_URL": "https://minio.example", "AWS_DEFAULT_REGION": "us-west-2"},
			want: objstore.S3Config{Bucket: "bkt", Prefix: "a/b", Endpoint: "https://minio.example", Region: "us-west-2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := objstore.ParseS3("s3://bkt/a/b/", func(k string) string { return tc.env[k] })
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
