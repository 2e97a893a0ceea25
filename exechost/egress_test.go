package exechost

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckEgressHost(t *testing.T) {
	ok := []string{"example.com", "api.openai.com", "*.example.com", "*.a.example.com", "xn--bcher-kva.example", "a-b.c0.io", "localhost.example"}
	for _, h := range ok {
		if err := CheckEgressHost(h); err != nil {
			t.Errorf("CheckEgressHost(%q) = %v, want nil", h, err)
		}
	}
	bad := map[string]string{
		"":                                       "empty",
		"*":                                      "wildcard",
		"*.com":                                  "two labels",
		"*.*.example.com":                        "wildcard",
		"a.*.example.com":                        "wildcard",
		"ex*ample.com":                           "wildcard",
		"127.0.0.1":                              "IP literal",
		"169.254.169.254":                        "IP literal",
		"::1":                                    "IP literal",
		"[::1]":                                  "IP literal",
		"[fe80::1]":                              "IP literal",
		"10.1":                                   "address",
		"0x7f.1":                                 "address",
		"2130706433":                             "address",
		"Example.com":                            "lower case",
		"example.com.":                           "trailing dot",
		"-a.example.com":                         "'-'",
		"a..example.com":                         "empty label",
		"a_b.example.com":                        "only a-z",
		"exa mple.com":                           "only a-z",
		"example.com:443":                        "only a-z",
		"user@example.com":                       "only a-z",
		strings.Repeat("a", 64) + ".com":         "longer than 63",
		strings.Repeat("abcdefghi.", 26) + "com": "longer than 253",
	}
	for h, want := range bad {
		err := CheckEgressHost(h)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckEgressHost(%q) = %v, want an error containing %q", h, err, want)
		}
	}
}

func TestCheckEgressHeader(t *testing.T) {
	for _, n := range []string{"Authorization", "X-Api-Key", "x-goog-api-key"} {
		if err := CheckEgressHeaderName(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	for _, n := range []string{"", "Host", "host", "Content-Length", "Transfer-Encoding", "Proxy-Authorization", "Connection", "X-Upstream-Https-Proxy", "Bad Name", "Bad:Name", "Bäd"} {
		if err := CheckEgressHeaderName(n); err == nil {
			t.Errorf("CheckEgressHeaderName(%q) = nil, want an error", n)
		}
	}
	for _, v := range []string{"a\r\nX-Evil: 1", "a\nb", "a\x00", strings.Repeat("x", MaxEgressHeaderBytes+1)} {
		err := CheckEgressHeaderValue(v)
		if err == nil {
			t.Errorf("CheckEgressHeaderValue(%q) = nil", v)
		} else if strings.Contains(err.Error(), "X-Evil") {
			t.Errorf("the error repeats the value: %v", err)
		}
	}
}

func TestMatchEgress(t *testing.T) {
	rules := []EgressRule{{Host: "api.example.com", Port: 443, Headers: map[string]string{"A": "exact"}},
		{Host: "*.example.com", Port: 443}, {Host: "feed.example.org", Port: 80}}
	cases := []struct {
		host string
		port int
		want string // "" = refused
	}{
		{"api.example.com", 443, "api.example.com"},
		{"API.Example.com.", 443, "api.example.com"},
		{"a.example.com", 443, "*.example.com"},
		{"a.b.example.com", 443, "*.example.com"},
		{"example.com", 443, ""},
		{"evilexample.com", 443, ""},
		{"api.example.com", 80, ""},
		{"feed.example.org", 80, "feed.example.org"},
		{"feed.example.org", 443, ""},
		{"x.feed.example.org", 80, ""},
		{".example.com", 443, ""},
	}
	for _, c := range cases {
		r, ok := MatchEgress(rules, c.host, c.port)
		if got := map[bool]string{true: r.Host}[ok]; got != c.want {
			t.Errorf("MatchEgress(%q, %d) = %q, want %q", c.host, c.port, got, c.want)
		}
	}
}

func TestValidateProvisionEgress(t *testing.T) {
	base := func() ProvisionRequest {
		return ProvisionRequest{ExecutionID: "x", Image: "sha256:" + strings.Repeat("a", 64),
			Resources: ResourceLimits{NanoCPUs: 1e9, MemoryBytes: 64 << 20, DiskBytes: 8 << 20, Pids: 64, Runtime: 60e9, MaxOutputBytes: 1 << 20}}
	}
	good := base()
	good.Network = NetworkEgress
	good.Egress = &EgressPolicy{Rules: []EgressRule{{Host: "example.com", Port: 443}}, MaxBytes: 1 << 20}
	if err := (Validator{}).ValidateProvision(good); err != nil {
		t.Fatalf("good request refused: %v", err)
	}
	cases := map[string]func(*ProvisionRequest){
		"egress network without policy": func(r *ProvisionRequest) { r.Egress = nil },
		"policy without egress network": func(r *ProvisionRequest) { r.Network = NetworkNone },
		"no rules":                      func(r *ProvisionRequest) { r.Egress.Rules = nil },
		"ip rule":                       func(r *ProvisionRequest) { r.Egress.Rules[0].Host = "10.0.0.1" },
		"port 0":                        func(r *ProvisionRequest) { r.Egress.Rules[0].Port = 0 },
		"duplicate": func(r *ProvisionRequest) {
			r.Egress.Rules = append(r.Egress.Rules, r.Egress.Rules[0])
		},
		"no byte budget":   func(r *ProvisionRequest) { r.Egress.MaxBytes = 0 },
		"smuggling header": func(r *ProvisionRequest) { r.Egress.Rules[0].Headers = map[string]string{"Host": "evil.example"} },
		"header with CR LF": func(r *ProvisionRequest) {
			r.Egress.Rules[0].Headers = map[string]string{"Authorization": "x\r\nHost: evil"}
		},
	}
	for name, mutate := range cases {
		req := good
		eg := *good.Egress
		eg.Rules = append([]EgressRule(nil), good.Egress.Rules...)
		req.Egress = &eg
		mutate(&req)
		err := (Validator{}).ValidateProvision(req)
		if !errors.Is(err, ErrPolicy) {
			t.Errorf("%s: err = %v, want ErrPolicy", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "evil") {
			t.Errorf("%s: the error repeats a header value: %v", name, err)
		}
	}
}
