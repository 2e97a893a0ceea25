package egressproxy

import (
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/agentflow/agentflow/internal/egressproxy/wire"
)

// recorder writes wire.Records, one JSON object per line. It never
// carries a header value: records are built from hosts, ports, decisions
// and counters only.
type recorder struct {
	mu  sync.Mutex
	out io.Writer
	enc *json.Encoder
}

func newRecorder(out io.Writer) *recorder {
	return &recorder{out: out, enc: json.NewEncoder(out)}
}

func (r *recorder) write(rec wire.Record) {
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(rec)
}

// denyHook turns smokescreen's refusals (its CANONICAL-PROXY-DECISION log
// entry with allow=false: not on the list, an address class it refuses, a
// name that does not resolve) into records. Allowed connections are
// recorded by the connection wrapper when they end, with their bytes.
type denyHook struct{ rec *recorder }

func (h denyHook) Levels() []logrus.Level { return logrus.AllLevels }

func (h denyHook) Fire(e *logrus.Entry) error {
	if e.Message != "CANONICAL-PROXY-DECISION" {
		return nil
	}
	if allow, _ := e.Data["allow"].(bool); allow {
		return nil
	}
	host, port := splitHostPort(str(e.Data["requested_host"]), 0)
	kind := str(e.Data["proxy_type"])
	if port == 0 {
		port = map[string]int{"connect": 443}[kind]
		if port == 0 {
			port = 80
		}
	}
	reason := str(e.Data["decision_reason"])
	if er := str(e.Data["error"]); er != "" {
		reason = er
	}
	if reason == "" {
		reason = "refused"
	}
	h.rec.write(wire.Record{Type: "conn", Host: host, Port: port, Kind: kind, Allowed: false, Reason: reason})
	return nil
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case error:
		return x.Error()
	case int:
		return strconv.Itoa(x)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}
