package server

import (
	_ "embed"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// Environment variables of agentflow-upstream holding its TLS certificate
// chain and key, PEM.
const (
	EnvCert = "AGENTFLOW_UPSTREAM_TLS_CERT"
	EnvKey  = "AGENTFLOW_UPSTREAM_TLS_KEY"
)

// Config selects the HTTP services and how strict they are.
type Config struct {
	Feed, OpenAI, Webhook bool
	// RequireAuth makes the OpenAI stub answer 401, and Slack's Web API
	// {"ok":false,"error":"not_authed"}, to a request without
	// "Authorization: Bearer …": the header the egress proxy brokers, so
	// a live run fails visibly when it is missing.
	RequireAuth bool
}

// AllServices is every HTTP service, with authentication required.
var AllServices = Config{Feed: true, OpenAI: true, Webhook: true, RequireAuth: true}

// MaxBody bounds a request body the upstream reads and records.
const MaxBody = 4 << 20

//go:embed feed.xml
var feedXML []byte

// FeedTitles are the titles of the fixture feed's items, in order: text
// no embedded fixture of rss-fetcher has, so a test can tell a live fetch.
var FeedTitles = []string{
	"Upstream fixture: Quokka Labs ships a solar-powered edge router",
	"Upstream fixture: Fjordline opens a carbon-negative data centre in Tromsø",
	"Upstream fixture: Marlowe Bio trains a protein model on a laptop cluster",
}

// FeedXML is the fixture feed the feed service answers.
func FeedXML() []byte { return feedXML }

type answer struct {
	status int
	ctype  string
	body   []byte
}

func jsonAnswer(status int, v any) answer {
	b, _ := json.Marshal(v)
	return answer{status: status, ctype: "application/json", body: append(b, '\n')}
}

// Handler serves the selected HTTP services (plain and TLS listeners
// share it) and records every request before answering it, so a client
// that has its answer finds its request in /recorded.
func Handler(cfg Config, rec *Recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
		var a answer
		svc := route(cfg, r)
		switch {
		case err != nil:
			a = answer{status: http.StatusBadRequest, ctype: "text/plain", body: []byte("read body: " + err.Error() + "\n")}
		case len(body) > MaxBody:
			a = answer{status: http.StatusRequestEntityTooLarge, ctype: "text/plain", body: []byte("body too large\n")}
		default:
			a = serve(cfg, svc, r, body)
		}
		q := Request{
			Time: time.Now().UTC(), Service: svc, TLS: r.TLS != nil, Method: r.Method, Host: r.Host,
			Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(body), Status: a.status,
		}
		if r.TLS != nil {
			q.SNI = r.TLS.ServerName
		}
		rec.addRequest(q)
		w.Header().Set("Content-Type", a.ctype)
		w.WriteHeader(a.status)
		_, _ = w.Write(a.body)
	})
}

func route(cfg Config, r *http.Request) string {
	p := r.URL.Path
	switch {
	case cfg.Feed && (p == "/feed" || p == "/feed/"):
		return "feed"
	case cfg.OpenAI && (p == "/v1/chat/completions" || p == "/chat/completions"):
		return "openai"
	case cfg.Webhook && r.Method == http.MethodPost && strings.HasPrefix(p, "/api/"):
		return "slack-api"
	case cfg.Webhook && r.Method == http.MethodPost:
		return "webhook"
	default:
		return "unknown"
	}
}

func serve(cfg Config, svc string, r *http.Request, body []byte) answer {
	switch svc {
	case "feed":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return answer{status: http.StatusMethodNotAllowed, ctype: "text/plain", body: []byte("GET only\n")}
		}
		return answer{status: http.StatusOK, ctype: "application/rss+xml; charset=utf-8", body: feedXML}
	case "openai":
		return chatCompletion(cfg, r, body)
	case "slack-api":
		if cfg.RequireAuth && !hasBearer(r) {
			return jsonAnswer(http.StatusOK, map[string]any{"ok": false, "error": "not_authed"})
		}
		var p struct {
			Channel string `json:"channel"`
		}
		_ = json.Unmarshal(body, &p)
		return jsonAnswer(http.StatusOK, map[string]any{"ok": true, "channel": p.Channel, "ts": "1718438400.000100"})
	case "webhook":
		return jsonAnswer(http.StatusOK, map[string]any{"ok": true})
	default:
		return answer{status: http.StatusNotFound, ctype: "text/plain", body: []byte("no such upstream service\n")}
	}
}

func hasBearer(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != ""
}

// Control serves GET /recorded (Recorded as JSON), GET /healthz and
// POST /reset. It listens apart from the services, in plain HTTP, and
// records nothing itself.
func Control(rec *Recorder) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /recorded", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rec.Snapshot())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		rec.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
