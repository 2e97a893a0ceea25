// Package server is the agentflow test upstream: the services a live
// spec talks to, in one process, answering deterministically and
// recording everything it receives so a test can check what crossed the
// egress boundary (the brokered Authorization header included).
//
//   - feed: GET /feed and /feed/ answer an RSS 2.0 fixture (FeedTitles);
//   - openai: POST /v1/chat/completions (also /chat/completions) answers
//     a chat completion of bullet insights derived from the user message;
//   - webhook: any other POST (Slack's /api/chat.postMessage, an incoming
//     webhook's /services/…) answers {"ok":true};
//   - smtp: an SMTP sink (EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT,
//     STARTTLS when it has a certificate);
//   - control: GET /recorded (everything above, as JSON), GET /healthz,
//     POST /reset.
//
// The binary is cmd/agentflow-upstream, the image
// agentflow/test-upstream:latest (tools/build-images.sh); tests start it
// with package testupstream. Unit tests may use the handlers in-process.
package server

import (
	"net/http"
	"slices"
	"sync"
	"time"
)

// Request is one HTTP request an upstream service received.
type Request struct {
	Seq     int         `json:"seq"`
	Time    time.Time   `json:"time"`
	Service string      `json:"service"` // feed | openai | webhook | slack-api | unknown
	TLS     bool        `json:"tls"`
	SNI     string      `json:"sni,omitempty"`
	Method  string      `json:"method"`
	Host    string      `json:"host"`
	Path    string      `json:"path"`
	Query   string      `json:"query,omitempty"`
	Header  http.Header `json:"header"`
	Body    string      `json:"body"`
	Status  int         `json:"status"` // what the upstream answered
}

// Message is one mail the SMTP sink accepted.
type Message struct {
	Seq    int       `json:"seq"`
	Time   time.Time `json:"time"`
	Listen string    `json:"listen"` // the sink's address it arrived on
	TLS    bool      `json:"tls"`    // after STARTTLS
	Helo   string    `json:"helo"`
	From   string    `json:"from"`
	To     []string  `json:"to"`
	Data   string    `json:"data"`
}

// Recorded is what GET /recorded answers.
type Recorded struct {
	Requests []Request `json:"requests"`
	Messages []Message `json:"messages"`
}

// Recorder keeps every request and message, in arrival order. It is safe
// for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	seq int
	rec Recorded
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{rec: Recorded{Requests: []Request{}, Messages: []Message{}}}
}

func (r *Recorder) addRequest(q Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	q.Seq = r.seq
	r.rec.Requests = append(r.rec.Requests, q)
}

func (r *Recorder) addMessage(m Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	m.Seq = r.seq
	r.rec.Messages = append(r.rec.Messages, m)
}

// Snapshot returns a copy of everything recorded so far.
func (r *Recorder) Snapshot() Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Recorded{Requests: slices.Clone(r.rec.Requests), Messages: slices.Clone(r.rec.Messages)}
}

// Reset forgets everything recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec = Recorded{Requests: []Request{}, Messages: []Message{}}
}

// Service filters the recorded requests of one service.
func (rec Recorded) Service(name string) []Request {
	var out []Request
	for _, q := range rec.Requests {
		if q.Service == name {
			out = append(out, q)
		}
	}
	return out
}
