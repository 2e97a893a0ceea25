// Package sdkconn applies temporalconn's settings to Temporal SDK client
// options: the part of connecting that needs the SDK.
package sdkconn

import (
	"context"
	"maps"

	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/temporalconn"
)

// Apply sets o's TLS configuration, with an API key its credentials, and
// with headers (a profile's grpc_meta) its headers provider.
func Apply(s temporalconn.Security, o *client.Options) error {
	cfg, err := s.TLSConfig()
	if err != nil {
		return err
	}
	o.ConnectionOptions.TLS = cfg
	if s.APIKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(s.APIKey)
	}
	if len(s.Headers) > 0 {
		o.HeadersProvider = fixedHeaders(maps.Clone(s.Headers))
	}
	return nil
}

// fixedHeaders sends the same gRPC metadata with every request.
type fixedHeaders map[string]string

func (h fixedHeaders) GetHeaders(context.Context) (map[string]string, error) { return h, nil }
