// Command encleak is a hostile test tool: it leaks the secret it was given
// (from an env variable or its input) in every common encoding — base64
// standard and URL-safe at each of the 3 alignments inside a longer text,
// hex lower and upper case, URL query and path escaping, JSON — on stdout,
// on stderr and into a workspace file. Tests prove that none of it leaves
// the step: output and logs are scrubbed, the checkpoint redacted.
package main

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/agentflow/agentflow/tools/internal/toolkit"
)

//go:embed VERSION
var version string

var tool = toolkit.Tool{
	Name:    "encleak",
	Version: version,
	Summary: "leak a secret in every common encoding (hostile test tool)",
	Usage: `Input:  {"env": "VAR", "secret": "value", "file": "leak.txt"}
The secret is $VAR when "env" is set, else "secret".
Output: {"forms": {"<encoding>": "<encoded text>", ...}}; the same lines go
to stderr and to /workspace/<file> (default leak.txt).`,
}

type input struct {
	Env    string `json:"env"`
	Secret string `json:"secret"`
	File   string `json:"file"`
}

type output struct {
	Forms map[string]string `json:"forms"`
}

func main() { toolkit.Main(tool, handle) }

// Forms returns the secret embedded in a longer text, encoded every way.
func Forms(secret string) map[string]string {
	out := map[string]string{
		"plain":      secret,
		"hex":        hex.EncodeToString([]byte(secret)),
		"HEX":        strings.ToUpper(hex.EncodeToString([]byte(secret))),
		"query":      "https://example.test/cb?token=" + url.QueryEscape(secret) + "&x=1",
		"path":       "https://example.test/u/" + url.PathEscape(secret) + "/x",
		"basic_auth": "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+secret)),
	}
	encs := map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding, "rawstd": base64.RawStdEncoding, "rawurl": base64.RawURLEncoding}
	for name, enc := range encs {
		for align := 0; align < 3; align++ {
			text := strings.Repeat("P", align) + secret + " trailing text"
			out[fmt.Sprintf("b64_%s_%d", name, align)] = enc.EncodeToString([]byte(text))
		}
	}
	return out
}

func handle(_ context.Context, env toolkit.Env, in input) (any, error) {
	secret := in.Secret
	if in.Env != "" {
		secret = env.Getenv(in.Env)
	}
	if secret == "" {
		return nil, toolkit.BadInput("no secret: set env (a variable name) or secret")
	}
	file := in.File
	if file == "" {
		file = "leak.txt"
	}
	forms := Forms(secret)
	names := make([]string, 0, len(forms))
	for n := range forms {
		names = append(names, n)
	}
	sort.Strings(names)
	var lines strings.Builder
	for _, n := range names {
		fmt.Fprintf(&lines, "%s: %s\n", n, forms[n])
	}
	fmt.Fprint(env.Stderr, lines.String())
	root, err := env.OpenWorkspace()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := toolkit.WriteFile(root, file, []byte(lines.String())); err != nil {
		return nil, err
	}
	return output{Forms: forms}, nil
}
