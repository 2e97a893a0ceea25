package main

import (
	"bytes"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

// Message is a composed RFC 5322 message.
type Message struct {
	ID    string
	From  string   // bare envelope sender
	To    []string // bare envelope recipients
	Bytes []byte
}

const defaultFrom = "Support <support@agentflow.local>"

// Compose validates addresses and builds the message: CRLF line endings,
// encoded-word subject, quoted-printable UTF-8 body. Header values with line
// breaks are refused (header injection).
func Compose(in input, now time.Time, stepID string) (Message, error) {
	to, err := parseAddrs("to", string(in.To))
	if err != nil {
		return Message{}, err
	}
	fromRaw := in.From
	if strings.TrimSpace(fromRaw) == "" {
		fromRaw = defaultFrom
	}
	from, err := parseAddrs("from", fromRaw)
	if err != nil {
		return Message{}, err
	}
	if len(from) != 1 {
		return Message{}, toolkit.BadInput("from must be one address")
	}
	subject := string(in.Subject)
	if strings.ContainsAny(subject, "\r\n") {
		return Message{}, toolkit.BadInput("subject must be one line")
	}
	body := string(in.Body)
	if strings.TrimSpace(body) == "" {
		return Message{}, toolkit.BadInput("body is empty")
	}

	id := fmt.Sprintf("<%s@agentflow.local>", shortHash(strings.Join(to, ","), subject, body, stepID, now.Format(time.RFC3339Nano)))
	var b bytes.Buffer
	header := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	header("From", from[0])
	header("To", strings.Join(to, ", "))
	header("Subject", mime.QEncoding.Encode("utf-8", subject))
	header("Date", now.Format(time.RFC1123Z))
	header("Message-ID", id)
	header("MIME-Version", "1.0")
	header("Content-Type", `text/plain; charset="utf-8"`)
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	body = strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\n", "\r\n")
	if _, err := qp.Write([]byte(body)); err != nil {
		return Message{}, fmt.Errorf("encode body: %w", err)
	}
	if err := qp.Close(); err != nil {
		return Message{}, fmt.Errorf("encode body: %w", err)
	}
	b.WriteString("\r\n")

	bare := make([]string, len(to))
	for i, a := range to {
		addr, _ := mail.ParseAddress(a)
		bare[i] = addr.Address
	}
	sender, _ := mail.ParseAddress(from[0])
	return Message{ID: id, From: sender.Address, To: bare, Bytes: b.Bytes()}, nil
}

// parseAddrs parses a comma-separated address list and returns each address
// in its canonical header form.
func parseAddrs(field, raw string) ([]string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, toolkit.BadInput("%s is required", field)
	}
	if strings.ContainsAny(raw, "\r\n") {
		return nil, toolkit.BadInput("%s must be one line", field)
	}
	list, err := mail.ParseAddressList(raw)
	if err != nil {
		return nil, toolkit.BadInput("%s %q: %v", field, raw, err)
	}
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.String()
	}
	return out, nil
}
