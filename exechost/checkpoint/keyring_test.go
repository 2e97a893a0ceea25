package checkpoint

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeyringSignVerify(t *testing.T) {
	ring := testKeyring(t, "new", "old")
	oldOnly := testKeyring(t, "old")
	other := testKeyring(t, "xother")
	const domain = "agentflow test record v1"
	msg := []byte(`{"a":1}`)
	oldID, oldMAC := oldOnly.Sign(domain, msg)
	id, mac := ring.Sign(domain, msg)
	require.Equal(t, "new", id, "the first key signs")

	tests := []struct {
		name   string
		domain string
		msg    []byte
		keyID  string
		mac    string
		ok     bool
	}{
		{name: "as signed", domain: domain, msg: msg, keyID: id, mac: mac, ok: true},
		{name: "rotated-out key still verifies", domain: domain, msg: msg, keyID: oldID, mac: oldMAC, ok: true},
		{name: "edited message", domain: domain, msg: []byte(`{"a":2}`), keyID: id, mac: mac},
		{name: "other domain", domain: "agentflow checkpoint manifest v2\n", msg: msg, keyID: id, mac: mac},
		{name: "empty domain", domain: "", msg: msg, keyID: id, mac: mac},
		{name: "domain/message boundary moved", domain: domain + `{"a"`, msg: []byte(`:1}`), keyID: id, mac: mac},
		{name: "unknown key", domain: domain, msg: msg, keyID: "nope", mac: mac},
		{name: "mac claims a key it was not made with", domain: domain, msg: msg, keyID: "old", mac: mac},
		{name: "empty mac", domain: domain, msg: msg, keyID: id, mac: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ring.Verify(tt.domain, tt.msg, tt.keyID, tt.mac)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrBadSignature)
		})
	}
	// A ring without the key refuses what another ring signed.
	xid, xmac := other.Sign(domain, msg)
	require.ErrorIs(t, ring.Verify(domain, msg, xid, xmac), ErrBadSignature)
}
