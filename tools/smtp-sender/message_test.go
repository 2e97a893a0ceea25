package main

import (
	"bytes"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCompose(t *testing.T) {
	now := time.Date(2024, 6, 15, 8, 30, 0, 0, time.UTC)
	tests := []struct {
		name    string
		in      input
		wantTo  []string
		wantErr string
	}{
		{name: "seed reply", in: input{To: "user@corp.com", Subject: "Re: Your billing inquiry", Body: "Dear Dana,\nrefund of 30.00 USD — sorry!"}, wantTo: []string{"user@corp.com"}},
		{name: "list with names", in: input{To: "A <a@x.io>, b@y.io", Subject: "Grüße", Body: "hi"}, wantTo: []string{"a@x.io", "b@y.io"}},
		{name: "missing to", in: input{Subject: "s", Body: "b"}, wantErr: "to is required"},
		{name: "bad to", in: input{To: "not an address", Subject: "s", Body: "b"}, wantErr: "to \"not an address\""},
		{name: "header injection", in: input{To: "a@b.c", Subject: "x\r\nBcc: evil@x.io", Body: "b"}, wantErr: "subject must be one line"},
		{name: "empty body", in: input{To: "a@b.c", Subject: "s", Body: " \n"}, wantErr: "body is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := Compose(tt.in, now, "send")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantTo, msg.To)

			// The result parses back as RFC 5322 with the same content.
			parsed, err := mail.ReadMessage(bytes.NewReader(msg.Bytes))
			require.NoError(t, err)
			require.Equal(t, msg.ID, parsed.Header.Get("Message-ID"))
			subj, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("Subject"))
			require.NoError(t, err)
			require.Equal(t, string(tt.in.Subject), subj)
			date, err := parsed.Header.Date()
			require.NoError(t, err)
			require.True(t, date.Equal(now))
			body, err := io.ReadAll(quotedprintable.NewReader(parsed.Body))
			require.NoError(t, err)
			require.Equal(t, strings.ReplaceAll(string(tt.in.Body), "\n", "\r\n")+"\r\n", string(body))
			for _, line := range strings.SplitAfter(string(msg.Bytes), "\n") {
				if line != "" {
					require.True(t, strings.HasSuffix(line, "\r\n"), "CRLF line endings: %q", line)
				}
			}
		})
	}
}
