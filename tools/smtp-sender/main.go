// Command smtp-sender is the complaint-handler demo's mail step. Given an
// SMTP server (smtp or smtp_url) in a sandbox with the egress boundary, it
// delivers the message over SMTP through a CONNECT tunnel of the egress
// proxy. Otherwise the sandbox has no network, so it writes the RFC 5322
// message into /workspace/outbox/ (a mail relay outside the sandbox could
// pick it up from the checkpoint).
package main

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "smtp-sender",
	Version: version,
	Summary: "send an email (live: SMTP through the egress proxy; offline: an RFC 5322 message in /workspace/outbox/)",
	Usage: `Input:  {"to": "user@corp.com", "subject": "...", "body": "...", "from": "support@agentflow.local",
         "smtp": {"host": "smtp.corp.com", "port": 587, "starttls": false}, "mode": "auto"}
        or "smtp_url": "smtp://smtp.corp.com:587" (port 25 by default; ?starttls=true)
        mode: auto (default): deliver when smtp is given and the sandbox has the
              egress boundary (HTTPS_PROXY set; the step declares egress, e.g.
              egress: ["smtp.corp.com:587"]), else write the outbox file;
              live: always deliver (needs smtp and the proxy); offline: outbox.
Output: offline: {"message_id": "<...@agentflow.local>", "path": "outbox/msg-1.eml", "to": ["user@corp.com"], "bytes": N}
        live:    {"message_id", "to", "bytes", "delivered": true, "server": "smtp.corp.com:587"}
Live, SMTP (EHLO, MAIL FROM, RCPT TO, DATA, QUIT) runs in a CONNECT tunnel of
the proxy. STARTTLS is used only when "starttls" is true, and then it is
required: a server that does not offer it fails the step; its certificate is
verified against SSL_CERT_FILE. No AUTH.`,
}

type input struct {
	To      toolkit.Text `json:"to"`
	Subject toolkit.Text `json:"subject"`
	Body    toolkit.Text `json:"body"`
	From    string       `json:"from"`
	SMTP    *smtpConfig  `json:"smtp"`
	SMTPURL string       `json:"smtp_url"`
	Mode    toolkit.Mode `json:"mode"`
}

func main() { toolkit.Main(tool, handle) }

func handle(ctx context.Context, env toolkit.Env, in input) (any, error) {
	msg, err := Compose(in, time.Now().UTC(), env.StepID)
	if err != nil {
		return nil, err
	}
	srv, err := parseServer(in)
	if err != nil {
		return nil, err
	}
	online, err := env.UseNetwork(in.Mode)
	if err != nil {
		return nil, err
	}
	switch {
	case srv != nil && online:
		if err := deliver(ctx, env, *srv, msg); err != nil {
			return nil, err
		}
		env.Log.Info("message delivered", "message_id", msg.ID, "server", srv.addr(), "recipients", len(msg.To), "starttls", srv.StartTLS)
		return map[string]any{"message_id": msg.ID, "to": msg.To, "bytes": len(msg.Bytes), "delivered": true, "server": srv.addr()}, nil
	case srv == nil && in.Mode == toolkit.ModeLive:
		return nil, toolkit.BadInput("mode live needs smtp or smtp_url")
	case srv != nil:
		env.Log.Warn("smtp is set but the sandbox has no egress proxy (the step declares no egress): writing the outbox file instead")
	}
	root, err := env.OpenWorkspace()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	path, err := toolkit.NextName(root, "outbox", "msg-", ".eml")
	if err != nil {
		return nil, err
	}
	if err := toolkit.WriteFile(root, path, msg.Bytes); err != nil {
		return nil, err
	}
	env.Log.Info("message queued", "message_id", msg.ID, "path", path, "recipients", len(msg.To))
	return map[string]any{"message_id": msg.ID, "path": path, "to": msg.To, "bytes": len(msg.Bytes)}, nil
}

func shortHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}
