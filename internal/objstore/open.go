package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// ErrNoSuchBucket: Open found no bucket of that name at the endpoint (a
// configuration error, not an outage).
var ErrNoSuchBucket = errors.New("bucket does not exist")

// openCheckTimeout bounds Open's bucket check.
const openCheckTimeout = 30 * time.Second

// Open turns a --store value into a Store:
//
//	s3://BUCKET[/PREFIX]   S3; endpoint from AWS_ENDPOINT_URL_S3 or
//	                       AWS_ENDPOINT_URL (AWS S3 when neither is set),
//	                       credentials from AWS_ACCESS_KEY_ID,
//	                       AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, region
//	                       from AWS_REGION or AWS_DEFAULT_REGION (us-east-1)
//	file:///abs/path       Dir
//	/abs/path, rel/path    Dir
//
// getenv is os.Getenv in a binary (a map lookup in tests). For S3, Open
// checks that the bucket exists (one request): a missing bucket is
// ErrNoSuchBucket, an unreachable server or refused credentials an
// *UnavailableError.
func Open(ctx context.Context, spec string, getenv func(string) string) (Store, error) {
	switch {
	case spec == "":
		return nil, errors.New("object store: empty location")
	case strings.HasPrefix(spec, "s3://"):
		cfg, err := parseS3(spec, getenv)
		if err != nil {
			return nil, err
		}
		s, err := NewS3(cfg)
		if err != nil {
			return nil, fmt.Errorf("object store %q: %w", spec, err)
		}
		cctx, cancel := context.WithTimeout(ctx, openCheckTimeout)
		defer cancel()
		if err := s.checkBucket(cctx); err != nil {
			return nil, err
		}
		return s, nil
	case strings.HasPrefix(spec, "file://"):
		u, err := url.Parse(spec)
		if err != nil || (u.Host != "" && u.Host != "localhost") || !strings.HasPrefix(u.Path, "/") ||
			u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("object store %q: want file:///absolute/path", spec)
		}
		return NewDir(u.Path)
	case strings.Contains(spec, "://"):
		return nil, fmt.Errorf("object store %q: unsupported scheme (want s3://BUCKET[/PREFIX], file:///path or a path)", spec)
	default:
		return NewDir(spec)
	}
}

// parseS3 reads s3://BUCKET[/PREFIX] and the AWS_* variables.
func parseS3(spec string, getenv func(string) string) (S3Config, error) {
	u, err := url.Parse(spec)
	if err != nil {
		return S3Config{}, fmt.Errorf("object store %q: %w", spec, err)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" || u.Host == "" {
		return S3Config{}, fmt.Errorf("object store %q: want s3://BUCKET[/PREFIX] (endpoint and credentials come from AWS_* variables)", spec)
	}
	cfg := S3Config{
		Bucket:       u.Host,
		Prefix:       strings.Trim(u.Path, "/"),
		Endpoint:     firstSet(getenv, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:       firstSet(getenv, "AWS_REGION", "AWS_DEFAULT_REGION"),
		AccessKey:    getenv("AWS_ACCESS_KEY_ID"),
		SecretKey:    getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken: getenv("AWS_SESSION_TOKEN"),
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}
