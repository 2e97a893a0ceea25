package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/webhook"
)

// RunEnded settles a run's end on the worker that runs its last workflow
// task, as a local activity (changeInfraRetries v2): the run's metrics and
// log line, and whether this worker has webhook targets of its own
// (--webhook-url). The workflow schedules RunFinished only when there is
// somewhere to deliver (those, or the spec's notify URLs), so a run
// without webhooks ends without an activity task: three history events,
// a workflow task and a matching round trip fewer per run (DECISIONS 244).
// Best effort, like RunFinished: its failure never changes the run.
func (a *Activities) RunEnded(ctx context.Context, ev RunEvent) (bool, error) {
	a.recordRunEnd(ctx, ev)
	return len(a.opts.WebhookURLs) > 0, nil
}

// recordRunEnd is a run's end in the worker's metrics and log.
func (a *Activities) recordRunEnd(ctx context.Context, ev RunEvent) {
	a.opts.Metrics.RunEnded(ev.Spec, ev.Status, time.Duration(ev.DurationMS)*time.Millisecond)
	a.log.InfoContext(ctx, "run finished", "agent_id", ev.AgentID, "run_id", ev.RunID, "spec", ev.Spec,
		"status", ev.Status, "duration_ms", ev.DurationMS)
}

// WebhookEvent is the JSON body POSTed to webhooks when a run ends.
type WebhookEvent struct {
	Event string `json:"event"` // always "run.finished"
	RunEvent
	FinishedAt time.Time `json:"finished_at"`
}

// RunFinished records run metrics and POSTs the event to the spec's notify
// URLs and the worker's --webhook-url, once per terminal state the workflow
// reaches (SUCCEEDED, FAILED, CANCELED: the workflow runs it on a
// disconnected context, so a canceled run notifies too). A non-2xx answer
// or a transport error fails the activity so Temporal retries it with
// backoff (runFinishedOptions); a retry re-posts only to the targets not
// yet delivered (heartbeat details, best effort), each request signed
// afresh (webhook.Sign). Deliveries are therefore at least once, and every
// request carries Idempotency-Key: <run_id> so a receiver can drop
// duplicates. Every failed delivery counts as
// agentflow_webhook_deliveries_total{result="error"}: the one place
// delivery failures show in metrics (DECISIONS 205).
func (a *Activities) RunFinished(ctx context.Context, ev RunEvent) error {
	// Metrics once per run, not once per retry of a failed delivery, and
	// not again when RunEnded counted the run.
	if activity.GetInfo(ctx).Attempt <= 1 && !ev.MetricsRecorded {
		a.recordRunEnd(ctx, ev)
	}

	targets := dedupe(append(append([]string{}, ev.Webhooks...), a.opts.WebhookURLs...))
	if len(targets) == 0 {
		return nil
	}
	body := WebhookEvent{Event: "run.finished", RunEvent: ev, FinishedAt: time.Now().UTC()}
	body.Webhooks = nil // receivers need not learn each other's URLs
	body.MetricsRecorded = false
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode webhook event: %w", err)
	}
	// Targets an earlier attempt of this activity delivered to, by
	// targetTag: workers may have different --webhook-url lists, so an
	// index would not name the same target everywhere, and the URL itself
	// must not reach Temporal (it may carry a token).
	var delivered []string
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &delivered)
	}
	done := make(map[string]bool, len(delivered))
	for _, tag := range delivered {
		done[tag] = true
	}
	var errs []error
	for _, target := range targets {
		tag := targetTag(ev.RunID, target)
		if done[tag] {
			continue
		}
		err := a.post(ctx, target, ev.RunID, payload)
		a.opts.Metrics.WebhookDelivered(err)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		delivered = append(delivered, tag)
		activity.RecordHeartbeat(ctx, delivered)
	}
	return errors.Join(errs...)
}

func (a *Activities) post(ctx context.Context, target, runID string, payload []byte) error {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Validation refuses such URLs in specs; a bad --webhook-url is
		// reported without echoing it (it may embed a token).
		return errors.New("webhook: invalid URL (want http or https)")
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultWebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("webhook %s: %w", redactURL(u), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentflow-worker")
	req.Header.Set(webhook.HeaderIdempotencyKey, runID)
	if a.opts.WebhookSecret != nil {
		// Signed per request: every retry carries a fresh timestamp, so a
		// receiver's replay window holds for late retries too.
		webhook.Sign(req.Header, a.opts.WebhookSecret, a.now(), payload)
	}
	resp, err := a.opts.HTTPClient.Do(req)
	if err != nil {
		// *url.Error repeats the full URL; keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("webhook %s: %w", redactURL(u), err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook %s: status %d", redactURL(u), resp.StatusCode)
	}
	return nil
}

// targetTag names a delivered target in heartbeat details without its URL:
// a hash keyed by the run, so it tells nothing across runs.
func targetTag(runID, target string) string {
	h := sha256.Sum256([]byte(runID + "\x00" + target))
	return hex.EncodeToString(h[:8])
}

// redactURL keeps scheme and host only: webhook paths and queries often are
// the credential (Slack-style URLs), and errors land in history.
func redactURL(u *url.URL) string {
	return u.Scheme + "://" + u.Host + "/…"
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
