// Command smtp-sender is the complaint-handler demo's stand-in for an SMTP
// client: the sandbox has no network, so it writes an RFC 5322 message into
// /workspace/outbox/ (a mail relay outside the sandbox could pick it up from
// the checkpoint).
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
	Summary: "send an email (offline stand-in writing an RFC 5322 message to /workspace/outbox/)",
	Usage: `Input:  {"to": "user@corp.com", "subject": "...", "body": "...", "from": "support@agentflow.local"}
Output: {"message_id": "<...@agentflow.local>", "path": "outbox/msg-1.eml", "to": ["user@corp.com"]}`,
}

type input struct {
	To      toolkit.Text `json:"to"`
	Subject toolkit.Text `json:"subject"`
	Body    toolkit.Text `json:"body"`
	From    string       `json:"from"`
}

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	msg, err := Compose(in, time.Now().UTC(), env.StepID)
	if err != nil {
		return nil, err
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
