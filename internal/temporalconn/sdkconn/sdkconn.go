// Package sdkconn applies temporalconn's settings to Temporal SDK client
// options: the part of connecting that needs the SDK.
package sdkconn

import (
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/temporalconn"
)

// Apply sets o's TLS configuration and, with an API key, its credentials.
func Apply(s temporalconn.Security, o *client.Options) error {
	cfg, err := s.TLSConfig()
	if err != nil {
		return err
	}
	o.ConnectionOptions.TLS = cfg
	if s.APIKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(s.APIKey)
	}
	return nil
}
