//go:build integration

package testupstream_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/smtp"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/testenv"
	"github.com/agentflow/agentflow/internal/testupstream"
	"github.com/agentflow/agentflow/internal/testupstream/server"
)

// suiteLabel marks what this package's tests create, for the leftover
// check and for cleanup by hand.
const suiteLabel = "agentflow.test-suite=testupstream"

var labels = map[string]string{"agentflow.test-suite": "testupstream", "agentflow.test-owner": "s6-tools"}

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, suiteLabel)) }

// testNetwork creates a labelled bridge network, removed when t ends
// (registered first, so it outlives the containers on it).
func testNetwork(t *testing.T, c *client.Client) string {
	t.Helper()
	name := "agentflow-test-upstream-net-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	_, err := c.NetworkCreate(t.Context(), name, network.CreateOptions{Driver: "bridge", Labels: labels})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.NetworkRemove(ctx, name); err != nil {
			t.Errorf("remove network %s: %v", name, err)
		}
	})
	return name
}

// brokered adds the header the egress proxy would add: a test talking to
// the upstream directly stands in for the proxy.
type brokered struct {
	base  http.RoundTripper
	value string
}

func (b brokered) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.value)
	return b.base.RoundTrip(r)
}

func TestUpstream(t *testing.T) {
	c := testenv.Docker(t)
	net := testNetwork(t, c)
	up := testupstream.StartWith(t, c, testupstream.Options{Network: net, Labels: labels})
	require.NotEmpty(t, up.IP)
	require.NotEmpty(t, up.Subnet)
	hc := up.HTTPClient()
	ctx := t.Context()

	t.Run("feed over HTTPS and HTTP", func(t *testing.T) {
		for _, u := range []string{"https://techcrunch.com/feed/", "http://techcrunch.com/feed"} {
			resp, err := hc.Get(u)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, u)
			for _, title := range server.FeedTitles {
				require.Contains(t, string(body), title)
			}
		}
		rec, err := up.Recorded(ctx)
		require.NoError(t, err)
		feeds := rec.Service("feed")
		require.Len(t, feeds, 2)
		require.True(t, feeds[0].TLS)
		require.Equal(t, "techcrunch.com", feeds[0].SNI)
		require.False(t, feeds[1].TLS)
	})

	t.Run("chat completion records its Authorization header", func(t *testing.T) {
		chat := func(c *http.Client) (int, string) {
			resp, err := c.Post("https://api.openai.com/v1/chat/completions", "application/json", strings.NewReader(
				`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Three insights.\n\nAlpha beta gamma.\n\nDelta epsilon zeta."}]}`))
			require.NoError(t, err)
			defer resp.Body.Close()
			var out struct {
				Model   string `json:"model"`
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
			if len(out.Choices) == 0 {
				return resp.StatusCode, ""
			}
			require.Equal(t, "gpt-4o-mini", out.Model)
			return resp.StatusCode, out.Choices[0].Message.Content
		}
		status, content := chat(&http.Client{Transport: brokered{base: hc.Transport, value: "Bearer sk-test-brokered"}})
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "- [Alpha beta gamma]: Alpha beta gamma.\n- [Delta epsilon zeta]: Delta epsilon zeta.", content)
		status, _ = chat(hc)
		require.Equal(t, http.StatusUnauthorized, status, "no key, no completion")

		rec, err := up.Recorded(ctx)
		require.NoError(t, err)
		chats := rec.Service("openai")
		require.Len(t, chats, 2)
		require.Equal(t, "Bearer sk-test-brokered", chats[0].Header.Get("Authorization"))
		require.Equal(t, "api.openai.com", chats[0].SNI)
		require.Contains(t, chats[0].Body, `"model":"gpt-4o-mini"`)
		require.Empty(t, chats[1].Header.Get("Authorization"))
		require.Equal(t, http.StatusUnauthorized, chats[1].Status)
	})

	t.Run("webhook POST is recorded", func(t *testing.T) {
		resp, err := hc.Post("https://hooks.slack.com/services/T000/B000/XXXX", "application/json", strings.NewReader(`{"text":"daily summary"}`))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, `{"ok":true}`, strings.TrimSpace(string(body)))
		rec, err := up.Recorded(ctx)
		require.NoError(t, err)
		hooks := rec.Service("webhook")
		require.Len(t, hooks, 1)
		require.Equal(t, "/services/T000/B000/XXXX", hooks[0].Path)
		require.Equal(t, `{"text":"daily summary"}`, hooks[0].Body)
	})

	t.Run("SMTP message is recorded", func(t *testing.T) {
		send := func(port int, starttls bool, to string) {
			sc, err := smtp.Dial(up.Addr(port))
			require.NoError(t, err)
			defer sc.Close()
			require.NoError(t, sc.Hello("test.local"))
			if starttls {
				require.NoError(t, sc.StartTLS(&tls.Config{ServerName: "smtp.corp.com", RootCAs: up.CA.Pool()}))
			}
			require.NoError(t, sc.Mail("support@agentflow.local"))
			require.NoError(t, sc.Rcpt(to))
			w, err := sc.Data()
			require.NoError(t, err)
			_, err = io.WriteString(w, "Subject: Re: Your billing inquiry\r\n\r\nRefund approved.\r\n")
			require.NoError(t, err)
			require.NoError(t, w.Close())
			require.NoError(t, sc.Quit())
		}
		send(testupstream.SubmissionPort, true, "dana@corp.com")
		send(testupstream.SMTPPort, false, "ops@corp.com")
		rec, err := up.Recorded(ctx)
		require.NoError(t, err)
		require.Len(t, rec.Messages, 2)
		require.Equal(t, []string{"dana@corp.com"}, rec.Messages[0].To)
		require.True(t, rec.Messages[0].TLS)
		require.Contains(t, rec.Messages[0].Data, "Subject: Re: Your billing inquiry")
		require.False(t, rec.Messages[1].TLS)
	})

	t.Run("reset", func(t *testing.T) {
		require.NoError(t, up.Reset(ctx))
		rec, err := up.Recorded(ctx)
		require.NoError(t, err)
		require.Empty(t, rec.Requests)
		require.Empty(t, rec.Messages)
	})
}
