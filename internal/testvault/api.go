package testvault

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The HTTP API, as Vault documents it (see the package comment).

func cleanNS(ns string) string { return strings.Trim(ns, "/") }

// maxBody bounds request bodies (a test server, not a store).
const maxBody = 1 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := Request{
		Method:    r.Method,
		Path:      r.URL.EscapedPath(),
		Query:     r.URL.RawQuery,
		Namespace: cleanNS(r.Header.Get("X-Vault-Namespace")),
		Token:     r.Header.Get("X-Vault-Token"),
	}
	s.mu.Lock()
	hang, failWith := s.hang, s.failWith
	s.mu.Unlock()
	if hang != nil {
		s.mu.Lock()
		s.waiting++
		s.mu.Unlock()
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
		s.record(rec, 0)
		return
	}
	status, body := s.answer(r, rec, failWith)
	s.record(rec, status)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (s *Server) record(rec Request, status int) {
	rec.Status = status
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
}

func errorsBody(msgs ...string) map[string]any {
	if msgs == nil {
		msgs = []string{}
	}
	return map[string]any{"errors": msgs}
}

// answer is the API: status and JSON body.
func (s *Server) answer(r *http.Request, rec Request, failWith int) (int, any) {
	if failWith != 0 {
		if failWith == http.StatusServiceUnavailable {
			return failWith, errorsBody("Vault is sealed")
		}
		return failWith, errorsBody(http.StatusText(failWith))
	}
	// The decoded path, as Vault routes on it: an encoded "%2e%2e" is ".."
	// here, and refused.
	apiPath, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok || !cleanAPIPath(apiPath) {
		return http.StatusBadRequest, errorsBody("invalid request path")
	}
	write := r.Method == http.MethodPost || r.Method == http.MethodPut
	if r.Method != http.MethodGet && !write {
		return http.StatusMethodNotAllowed, errorsBody("unsupported operation")
	}
	var payload map[string]any
	if write {
		if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&payload); err != nil {
			return http.StatusBadRequest, errorsBody("failed to parse JSON input: " + err.Error())
		}
	}
	if apiPath == "auth/approle/login" && write {
		return s.login(rec.Namespace, payload)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	tok, known := s.tokens[rec.Token]
	if !known || tok.namespace != rec.Namespace {
		return http.StatusForbidden, errorsBody("permission denied")
	}
	granted := tok.policy.Read
	if write {
		granted = tok.policy.Write
	}
	if !tok.policy.allows(granted, apiPath) {
		return http.StatusForbidden, errorsBody("permission denied")
	}
	mount, rest, ok := strings.Cut(apiPath, "/data/")
	kv := s.mounts[rec.Namespace][mount]
	if !ok || kv == nil || rest == "" {
		return http.StatusNotFound, errorsBody(fmt.Sprintf("no handler for route %q. route entry not found.", apiPath))
	}
	if write {
		data, _ := payload["data"].(map[string]any)
		if data == nil {
			return http.StatusBadRequest, errorsBody("no data provided")
		}
		n := s.put(rec.Namespace, mount, rest, data)
		return http.StatusOK, map[string]any{"data": metadata(n, s.mounts[rec.Namespace][mount][rest].versions[n-1])}
	}
	return s.read(kv[rest], r.URL.Query().Get("version"))
}

// cleanAPIPath refuses what Vault's router refuses: empty, "." and ".."
// segments.
func cleanAPIPath(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func (s *Server) read(sec *secret, versionParam string) (int, any) {
	if sec == nil || len(sec.versions) == 0 {
		return http.StatusNotFound, errorsBody()
	}
	n := len(sec.versions)
	if versionParam != "" && versionParam != "0" {
		v, err := strconv.Atoi(versionParam)
		if err != nil || v < 0 {
			return http.StatusBadRequest, errorsBody("invalid version")
		}
		if v > n {
			return http.StatusNotFound, errorsBody()
		}
		n = v
	}
	ver := sec.versions[n-1]
	body := map[string]any{
		"request_id": fmt.Sprintf("testvault-%d", time.Now().UnixNano()), "lease_id": "", "renewable": false,
		"lease_duration": 0, "wrap_info": nil, "warnings": nil, "auth": nil,
		"data": map[string]any{"data": ver.data, "metadata": metadata(n, ver)},
	}
	if !ver.deleted.IsZero() {
		body["data"] = map[string]any{"data": nil, "metadata": metadata(n, ver)}
		return http.StatusNotFound, body
	}
	return http.StatusOK, body
}

func metadata(n int, v version) map[string]any {
	deleted := ""
	if !v.deleted.IsZero() {
		deleted = v.deleted.Format(time.RFC3339Nano)
	}
	return map[string]any{
		"created_time": v.created.Format(time.RFC3339Nano), "custom_metadata": nil,
		"deletion_time": deleted, "destroyed": false, "version": n,
	}
}

func (s *Server) login(ns string, payload map[string]any) (int, any) {
	roleID, _ := payload["role_id"].(string)
	secretID, _ := payload["secret_id"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	role, ok := s.approles[roleID]
	if !ok || role.namespace != ns || role.secretID != secretID || secretID == "" {
		return http.StatusBadRequest, errorsBody("invalid role or secret ID")
	}
	s.issued++
	tok := issuedToken(s.issued)
	s.tokens[tok] = token{namespace: ns, policy: role.policy}
	return http.StatusOK, map[string]any{
		"request_id": fmt.Sprintf("testvault-login-%d", s.issued), "lease_id": "", "renewable": false,
		"lease_duration": 0, "data": nil, "wrap_info": nil, "warnings": nil,
		"auth": map[string]any{
			"client_token": tok, "accessor": fmt.Sprintf("accessor-%d", s.issued),
			"policies": []string{"default", "agentflow"}, "token_policies": []string{"default", "agentflow"},
			"metadata": map[string]any{"role_name": roleID}, "lease_duration": 3600, "renewable": true,
			"entity_id": "", "token_type": "service", "orphan": true,
		},
	}
}
