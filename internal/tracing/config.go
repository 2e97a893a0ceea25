package tracing

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The standard OpenTelemetry variables this package reads itself. The OTLP
// exporters read the rest of OTEL_EXPORTER_OTLP_* (TLS, timeout,
// compression, headers) on their own; we only check that the headers parse,
// so a typo fails at start instead of silently dropping an API key.
const (
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvHeaders        = "OTEL_EXPORTER_OTLP_HEADERS"
	EnvTracesHeaders  = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
)

// OTLP transports (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// config is what the environment asks for.
type config struct {
	enabled  bool
	protocol string
	// endpoint is the exporter's endpoint with any user:password
	// redacted, for the start-up log line.
	endpoint string
	sampler  sdktrace.Sampler
	// samplerName is the sampler as configured, for the log line.
	samplerName string
}

// ConfigError is a tracing variable the process cannot start with. It
// names the variable, never a header value.
type ConfigError struct {
	Var string
	Msg string
}

func (e *ConfigError) Error() string { return e.Var + ": " + e.Msg }

// parseConfig reads the standard variables through getenv. No endpoint
// (or OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none) is "off": a
// valid configuration, not an error.
func parseConfig(getenv func(string) string) (config, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(get(EnvSDKDisabled), "true") {
		return config{}, nil
	}
	switch exp := strings.ToLower(get(EnvTracesExporter)); exp {
	case "", "otlp":
	case "none":
		return config{}, nil
	default:
		return config{}, &ConfigError{Var: EnvTracesExporter, Msg: fmt.Sprintf("%q is not supported (otlp or none)", exp)}
	}
	endpointVar, endpoint := EnvTracesEndpoint, get(EnvTracesEndpoint)
	if endpoint == "" {
		endpointVar, endpoint = EnvEndpoint, get(EnvEndpoint)
	}
	if endpoint == "" {
		return config{}, nil
	}
	redacted, err := checkEndpoint(endpoint)
	if err != nil {
		return config{}, &ConfigError{Var: endpointVar, Msg: err.Error()}
	}

	c := config{enabled: true, endpoint: redacted}
	protoVar, proto := EnvTracesProtocol, get(EnvTracesProtocol)
	if proto == "" {
		protoVar, proto = EnvProtocol, get(EnvProtocol)
	}
	switch proto {
	case "":
		// The specification's default transport.
		c.protocol = ProtocolHTTPProtobuf
	case ProtocolGRPC, ProtocolHTTPProtobuf:
		c.protocol = proto
	default:
		return config{}, &ConfigError{Var: protoVar, Msg: fmt.Sprintf("%q is not supported (grpc or http/protobuf)", proto)}
	}
	for _, k := range []string{EnvHeaders, EnvTracesHeaders} {
		if err := checkHeaders(getenv(k)); err != nil {
			return config{}, &ConfigError{Var: k, Msg: err.Error()}
		}
	}
	c.samplerName = strings.ToLower(get(EnvSampler))
	if c.sampler, err = parseSampler(c.samplerName, get(EnvSamplerArg)); err != nil {
		return config{}, err
	}
	if c.samplerName == "" {
		c.samplerName = "parentbased_always_on"
	}
	return c, nil
}

// checkEndpoint wants an absolute http(s) URL, as the specification
// defines the variable. It returns the URL without its password: an
// endpoint may carry credentials, and the start-up log prints it.
func checkEndpoint(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		// The value is not repeated: it may hold a credential.
		return "", fmt.Errorf("want an http:// or https:// URL with a host, e.g. http://otel-collector:4317")
	}
	return u.Redacted(), nil
}

// checkHeaders checks the W3C baggage-like list the exporters parse
// ("k1=v1,k2=v2", values URL-encoded). The exporters skip a malformed
// entry without a word; here it is an error naming its position only,
// because header values are typically API keys.
func checkHeaders(s string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for i, entry := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(entry, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("entry %d is not key=value", i+1)
		}
		if _, err := url.PathUnescape(strings.TrimSpace(k)); err != nil {
			return fmt.Errorf("entry %d: key is not URL-encoded", i+1)
		}
		if _, err := url.PathUnescape(strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("entry %d: value is not URL-encoded", i+1)
		}
	}
	return nil
}

// parseSampler maps OTEL_TRACES_SAMPLER / _ARG to a sampler. The SDK
// reads them too, but falls back to the default on a typo with only a
// log line; here a typo is an error.
func parseSampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, &ConfigError{Var: EnvSamplerArg, Msg: fmt.Sprintf("%q is not a ratio between 0 and 1", arg)}
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.TraceIDRatioBased(r), nil
	case "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, &ConfigError{Var: EnvSampler, Msg: fmt.Sprintf("%q is not supported (always_on, always_off, traceidratio, "+
		"parentbased_always_on, parentbased_always_off, parentbased_traceidratio)", name)}
}
