package main

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFormsCarryTheSecret(t *testing.T) {
	const secret = "s3cr3t-value"
	forms := Forms(secret)
	require.Len(t, forms, 6+4*3)
	b, err := base64.StdEncoding.DecodeString(forms["b64_std_2"])
	require.NoError(t, err)
	require.Equal(t, "PP"+secret+" trailing text", string(b))
	b, err = base64.RawURLEncoding.DecodeString(forms["b64_rawurl_1"])
	require.NoError(t, err)
	require.True(t, strings.Contains(string(b), secret))
	require.Equal(t, "73336372337", forms["hex"][:11])
}
