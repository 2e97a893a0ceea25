package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// S3 timeouts: a hung or black-holed server must fail an operation, not
// hang an attempt. Dial and TLS are quick on any reachable server; the
// header bound allows a loaded server to assemble a large multipart
// upload; a read that makes no progress for ReadStall fails.
const (
	s3DialTimeout     = 5 * time.Second
	s3TLSTimeout      = 10 * time.Second
	s3HeaderTimeout   = 30 * time.Second
	s3ReadStall       = 30 * time.Second
	s3MaxRetries      = 3 // minio-go's own retries per request (200 ms–1 s backoff)
	s3DefaultPartSize = 16 << 20
	// s3SmallObject: an unknown-size Put that ends within this many bytes
	// is sent as one PUT; a longer one becomes a multipart upload.
	s3SmallObject = 5 << 20
)

// S3Config selects a bucket (and a key prefix in it) on an S3-compatible
// server.
type S3Config struct {
	Bucket string
	Prefix string // key prefix inside the bucket, without slashes at the ends; may be empty
	// Endpoint is the server's URL ("http://127.0.0.1:9000",
	// "https://minio.example.com"). Empty means AWS S3 (virtual-host
	// addressing over TLS); with an endpoint, path-style addressing is used
	// and TLS follows the scheme.
	Endpoint     string
	Region       string // default us-east-1
	AccessKey    string
	SecretKey    string
	SessionToken string
	PartSize     uint64 // multipart part size; default 16 MiB (bounds the memory of one upload)
	// HeaderTimeout bounds the wait for a response's headers, ReadStall a
	// Read of an object's body that gets no byte (defaults 30 s each; tests
	// shorten them).
	HeaderTimeout time.Duration
	ReadStall     time.Duration
}

// S3 is a Store in an S3 bucket (AWS S3, MinIO, any S3-compatible server).
// Objects are whole PUTs or completed multipart uploads, so a failed Put is
// never visible; IfAbsent is a conditional PUT (If-None-Match: *).
type S3 struct {
	c        *minio.Client
	core     *minio.Core // the same client's low-level calls
	bucket   string
	prefix   string // "" or "p/q/"
	endpoint string // for messages: host[:port]
	partSize uint64
	stall    time.Duration
}

var _ Store = (*S3)(nil)

// NewS3 builds the client; it does not contact the server (Open checks the
// bucket).
func NewS3(cfg S3Config) (*S3, error) {
	if err := s3utils.CheckValidBucketNameStrict(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("s3 bucket %q: %w", cfg.Bucket, err)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("s3 prefix: %w", err)
		}
		prefix += "/"
	}
	host, secure, lookup := "s3.amazonaws.com", true, minio.BucketLookupAuto
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			strings.Trim(u.Path, "/") != "" || u.User != nil || u.RawQuery != "" {
			return nil, fmt.Errorf("s3 endpoint %q: want http(s)://host[:port]", cfg.Endpoint)
		}
		host, secure, lookup = u.Host, u.Scheme == "https", minio.BucketLookupPath
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: s3DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   s3TLSTimeout,
		ResponseHeaderTimeout: orDefault(cfg.HeaderTimeout, s3HeaderTimeout),
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   16,
	}
	c, err := minio.New(host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:       secure,
		Transport:    tr,
		Region:       region,
		BucketLookup: lookup,
		MaxRetries:   s3MaxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", host, err)
	}
	part := cfg.PartSize
	if part == 0 {
		part = s3DefaultPartSize
	}
	return &S3{c: c, core: &minio.Core{Client: c}, bucket: cfg.Bucket, prefix: prefix, endpoint: host, partSize: part,
		stall: orDefault(cfg.ReadStall, s3ReadStall)}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// String implements Store.
func (s *S3) String() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

// Endpoint is the server's host[:port].
func (s *S3) Endpoint() string { return s.endpoint }

// checkBucket is Open's start-up check: one request, a missing bucket is
// ErrNoSuchBucket, an unreachable or refusing server *UnavailableError.
func (s *S3) checkBucket(ctx context.Context) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.err(ctx, "check bucket", "", err)
	}
	if !ok {
		return fmt.Errorf("%s: %w at %s", s, ErrNoSuchBucket, s.endpoint)
	}
	return nil
}

// err maps a minio-go error (see the rules on UnavailableError): a
// missing object is ErrNotFound, a failed precondition ErrExists, the
// caller's own cancellation or deadline stays ctx.Err(); the server being
// unreachable, overloaded, failing or refusing the credentials is an
// *UnavailableError with one short reason naming the endpoint. Credentials
// never appear in a message (minio-go's errors carry none).
func (s *S3) err(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %s %s: %w", s, op, key, cerr)
	}
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case minio.NoSuchKey:
		return ErrNotFound
	case minio.PreconditionFailed:
		return ErrExists
	case minio.AccessDenied, minio.InvalidAccessKeyID, minio.SignatureDoesNotMatch, "ExpiredToken", "InvalidToken":
		return s.unavailable(op, key, "access denied", err)
	case minio.NoSuchBucket:
		return s.unavailable(op, key, "no such bucket", err)
	case "ConditionalRequestConflict":
		// AWS: a concurrent conditional write to the key is in flight; the
		// caller's retry sees ErrExists, or wins if that writer failed.
		return s.unavailable(op, key, "conflicting concurrent write", err)
	case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "XMinioServerNotInitialized":
		return s.unavailable(op, key, fmt.Sprintf("server answered %d %s", resp.StatusCode, resp.Code), err)
	}
	switch {
	case resp.StatusCode == http.StatusPreconditionFailed:
		return ErrExists
	case resp.StatusCode == http.StatusForbidden:
		return s.unavailable(op, key, "access denied", err)
	case resp.StatusCode >= 500:
		return s.unavailable(op, key, fmt.Sprintf("server answered %d %s", resp.StatusCode, resp.Code), err)
	case resp.StatusCode == 0:
		if reason := netReason(err); reason != "" {
			return s.unavailable(op, key, reason, err)
		}
	}
	return fmt.Errorf("%s: %s %s: %w", s, op, key, err)
}

// netReason names a transport failure in a few words, "" when err is not one.
func netReason(err error) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.As(err, &dnsErr):
		return "cannot resolve " + dnsErr.Name
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "request timed out"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed mid-response"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "network unreachable"
	case errors.As(err, &netErr):
		return "network error"
	}
	var uerr *url.Error // any other failure of the HTTP exchange itself
	if errors.As(err, &uerr) {
		return "request failed"
	}
	return ""
}

func (s *S3) unavailable(op, key, reason string, err error) error {
	return &UnavailableError{Store: s.String(), Op: op, Key: key, Reason: s.endpoint + ": " + reason, Err: err}
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, opts PutOptions) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	r = &ctxReader{ctx: ctx, r: r}
	size := opts.Size
	if size <= 0 {
		// Small objects (manifests, log chunks, results) go in one PUT; only
		// a stream longer than s3SmallObject pays for a multipart upload.
		head, err := io.ReadAll(io.LimitReader(r, s3SmallObject+1))
		if err != nil {
			if ctx.Err() != nil {
				return Info{}, ctx.Err()
			}
			return Info{}, fmt.Errorf("%s: put %s: read: %w", s, key, err)
		}
		if len(head) <= s3SmallObject {
			r, size = bytes.NewReader(head), int64(len(head))
		} else {
			r, size = io.MultiReader(bytes.NewReader(head), r), -1
		}
	}
	po := minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: s.partSize}
	if opts.IfAbsent {
		po.SetMatchETagExcept("*")
	}
	up, err := s.c.PutObject(ctx, s.bucket, s.prefix+key, r, size, po)
	if err != nil {
		return Info{}, s.err(ctx, "put", key, err)
	}
	mod := up.LastModified
	if mod.IsZero() {
		mod = time.Now()
	}
	return Info{Key: key, Size: up.Size, ModTime: mod}, nil
}

// Get implements Store. The first response is awaited here, so a missing
// key is ErrNotFound from Get itself; the body is read lazily and a
// failure or a stall (no byte for 30 s) mid-read is an *UnavailableError.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	// One GET (Core's, not Client.GetObject's lazy reader, which would
	// first send a HEAD): its status says whether the key exists, its body
	// is the object.
	body, _, _, err := s.core.GetObject(rctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		cancel()
		return nil, s.err(ctx, "get", key, err)
	}
	stall := time.AfterFunc(s.stall, cancel)
	stall.Stop() // armed only while a Read waits on the server
	return &s3Reader{s: s, ctx: ctx, key: key, body: body, cancel: cancel, stall: stall}, nil
}

// s3Reader maps mid-stream failures and cancels a read that stalls.
type s3Reader struct {
	s      *S3
	ctx    context.Context // the caller's
	key    string
	body   io.ReadCloser
	cancel context.CancelFunc
	stall  *time.Timer
}

func (r *s3Reader) Read(p []byte) (int, error) {
	r.stall.Reset(r.s.stall)
	n, err := r.body.Read(p)
	stalled := !r.stall.Stop() // the timer fired and canceled the request
	if err == nil || err == io.EOF {
		return n, err
	}
	if r.ctx.Err() != nil {
		return n, r.ctx.Err()
	}
	if stalled {
		return n, r.s.unavailable("get", r.key, "read stalled", err)
	}
	return n, r.s.err(r.ctx, "get", r.key, err)
}

func (r *s3Reader) Close() error {
	r.stall.Stop()
	r.cancel()
	return r.body.Close()
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	oi, err := s.c.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.err(ctx, "stat", key, err)
	}
	return Info{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// List implements Store. Objects whose key (after the store's prefix) is
// not a valid key were not written through a Store and are left out.
func (s *S3) List(ctx context.Context, prefix string) ([]Info, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops minio-go's listing goroutine on an early return
	var out []Info
	for oi := range s.c.ListObjects(lctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if oi.Err != nil {
			return nil, s.err(ctx, "list", prefix, oi.Err)
		}
		k := strings.TrimPrefix(oi.Key, s.prefix)
		if CheckKey(k) != nil {
			continue
		}
		out = append(out, Info{Key: k, Size: oi.Size, ModTime: oi.LastModified})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: list %s: %w", s, prefix, err)
	}
	sortInfos(out)
	return out, nil
}

// DeletePrefix implements Store: one listing, then batch deletes (S3
// DeleteObjects, up to 1000 keys a request).
func (s *S3) DeletePrefix(ctx context.Context, prefix string) ([]Info, error) {
	if err := checkSegmentPrefix(prefix); err != nil {
		return nil, err
	}
	infos, err := s.List(ctx, prefix)
	if err != nil || len(infos) == 0 {
		return nil, err
	}
	objs := make(chan minio.ObjectInfo, len(infos))
	for _, in := range infos {
		objs <- minio.ObjectInfo{Key: s.prefix + in.Key}
	}
	close(objs)
	failed := map[string]bool{}
	var first error
	for e := range s.c.RemoveObjects(ctx, s.bucket, objs, minio.RemoveObjectsOptions{}) {
		k := strings.TrimPrefix(e.ObjectName, s.prefix)
		if merr := s.err(ctx, "delete", k, e.Err); !errors.Is(merr, ErrNotFound) {
			failed[k] = true
			if first == nil {
				first = merr
			}
		}
	}
	done := infos[:0]
	for _, in := range infos {
		if !failed[in.Key] {
			done = append(done, in)
		}
	}
	return done, first
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	err := s.c.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{})
	if err != nil {
		if err = s.err(ctx, "delete", key, err); errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}
