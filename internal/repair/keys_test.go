package repair

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeKeys writes key's PKCS#8 and PKIX PEM files into dir.
func writeKeys(t *testing.T, dir string, key ed25519.PrivateKey) (priv, pub string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	priv = filepath.Join(dir, "gateway.key")
	require.NoError(t, os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	pder, err := x509.MarshalPKIXPublicKey(key.Public())
	require.NoError(t, err)
	pub = filepath.Join(dir, "gateway.pub")
	require.NoError(t, os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder}), 0o600))
	return priv, pub
}

func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	priv, pub := writeKeys(t, dir, testKey(3))
	k, err := LoadPrivateKey(priv)
	require.NoError(t, err)
	assert.Equal(t, testKey(3), k)
	pubs, err := LoadPublicKeys(pub)
	require.NoError(t, err)
	assert.Equal(t, []ed25519.PublicKey{testKey(3).Public().(ed25519.PublicKey)}, pubs)

	// Two public keys (a rotation).
	_, pub2 := writeKeys(t, t.TempDir(), testKey(4))
	a, _ := os.ReadFile(pub)
	b, _ := os.ReadFile(pub2)
	both := filepath.Join(dir, "both.pub")
	require.NoError(t, os.WriteFile(both, append(a, b...), 0o600))
	pubs, err = LoadPublicKeys(both)
	require.NoError(t, err)
	assert.Len(t, pubs, 2)
}

// Every failure names the file.
func TestLoadKeyErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	priv, pub := writeKeys(t, dir, testKey(3))
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	require.NoError(t, err)
	ecPubDER, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	require.NoError(t, err)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	privData, _ := os.ReadFile(priv)
	pubData, _ := os.ReadFile(pub)
	for name, c := range map[string]struct {
		load func(string) error
		path string
		want string
	}{
		"missing private":   {loadPriv, filepath.Join(dir, "nope.key"), "no such file"},
		"empty private":     {loadPriv, write("empty.key", nil), "no PEM block"},
		"public as private": {loadPriv, pub, `"PUBLIC KEY"`},
		"ecdsa private":     {loadPriv, write("ec.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})), "Ed25519"},
		"two private":       {loadPriv, write("two.key", append(append([]byte(nil), privData...), privData...)), "more than one"},
		"garbage private":   {loadPriv, write("garbage.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}})), "PKCS#8"},
		"missing public":    {loadPub, filepath.Join(dir, "nope.pub"), "no such file"},
		"private as public": {loadPub, priv, `"PRIVATE KEY"`},
		"ecdsa public":      {loadPub, write("ec.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecPubDER})), "Ed25519"},
		"empty public":      {loadPub, write("empty.pub", []byte("not pem")), "no PEM block"},
		"huge public":       {loadPub, write("huge.pub", []byte(strings.Repeat("x", maxKeyFile+1))), "over"},
		"second bad":        {loadPub, write("bad2.pub", append(append([]byte(nil), pubData...), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")...)), "block 1"},
	} {
		err := c.load(c.path)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.path, name)
		assert.Contains(t, err.Error(), c.want, name)
	}
}

func loadPriv(p string) error { _, err := LoadPrivateKey(p); return err }
func loadPub(p string) error  { _, err := LoadPublicKeys(p); return err }
