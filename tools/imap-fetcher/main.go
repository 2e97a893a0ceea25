// Command imap-fetcher is the complaint-handler demo's stand-in for an IMAP
// client: the sandbox has no network, so it serves messages from a mailbox
// fixture compiled into the binary (or a mailbox file in the workspace).
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

//go:embed mailbox.json
var fixture []byte

var tool = toolkit.Tool{
	Name:    "imap-fetcher",
	Version: version,
	Summary: "fetch one email by id (offline stand-in serving an embedded mailbox)",
	Usage: `Input:  {"email_id": "msg-001", "mailbox": "optional/workspace/path.json"}
Output: {"email_id", "sender", "subject", "body", "date"}
Embedded ids: msg-001 (billing dispute, user@corp.com), msg-002 (crash report),
msg-003 (billing dispute from a customer the ledger does not know).`,
}

type input struct {
	EmailID string `json:"email_id"`
	Mailbox string `json:"mailbox"` // a JSON mailbox file inside /workspace; default: embedded
}

type message struct {
	ID      string `json:"id"`
	Sender  string `json:"sender"`
	Subject string `json:"subject"`
	Date    string `json:"date"`
	Body    string `json:"body"`
}

type output struct {
	EmailID string `json:"email_id"`
	Sender  string `json:"sender"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
	Date    string `json:"date,omitempty"`
}

func main() { toolkit.Main(tool, handle) }

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	data := fixture
	if in.Mailbox != "" {
		root, err := env.OpenWorkspace()
		if err != nil {
			return nil, err
		}
		defer root.Close()
		if data, err = toolkit.ReadFile(root, in.Mailbox); err != nil {
			return nil, err
		}
	}
	box, err := parseMailbox(data)
	if err != nil {
		return nil, err
	}
	msg, err := fetch(box, in.EmailID)
	if err != nil {
		return nil, err
	}
	env.Log.Info("fetched email", "email_id", msg.ID, "body_bytes", len(msg.Body))
	return output{EmailID: msg.ID, Sender: msg.Sender, Subject: msg.Subject, Body: msg.Body, Date: msg.Date}, nil
}

func parseMailbox(data []byte) ([]message, error) {
	var box []message
	if err := json.Unmarshal(data, &box); err != nil {
		return nil, fmt.Errorf("parse mailbox: %w", err)
	}
	return box, nil
}

// fetch finds a message by id; ids are matched case-insensitively and a bare
// number ("1") matches "msg-001" because that is how people type them.
func fetch(box []message, id string) (message, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return message{}, toolkit.BadInput("email_id is required")
	}
	for _, m := range box {
		if strings.EqualFold(m.ID, id) || strings.EqualFold(m.ID, fmt.Sprintf("msg-%03s", id)) {
			return m, nil
		}
	}
	ids := make([]string, 0, len(box))
	for _, m := range box {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	return message{}, fmt.Errorf("email %q not found in mailbox (have %s)", id, strings.Join(ids, ", "))
}
