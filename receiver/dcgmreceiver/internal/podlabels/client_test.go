package podlabels

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels/fakeapi"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// As client-go's rest.InClusterConfig: the service's host and port, the
// service account's token file and CA bundle.
func TestInClusterConfig(t *testing.T) {
	srv := fakeapi.New(t, "sa-token")
	srv.Put(pod("gpu-1", "training", "a", map[string]string{"v": "1"}))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("sa-token"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), srv.CAPEM(), 0o600))
	u, err := url.Parse(srv.URL())
	require.NoError(t, err)
	vars := map[string]string{"KUBERNETES_SERVICE_HOST": u.Hostname(), "KUBERNETES_SERVICE_PORT": u.Port()}

	c, err := inClusterConfig(env(vars), dir)
	require.NoError(t, err)
	assert.Equal(t, Config{Host: srv.URL(), TokenFile: filepath.Join(dir, "token"), CAFile: filepath.Join(dir, "ca.crt")}, c)
	cl, err := NewClient(c)
	require.NoError(t, err)
	w := watch(t, cl, Settings{Node: "gpu-1"}, nil)
	assert.NotNil(t, w.Labels("training", "a"))
	assert.Equal(t, "Bearer sa-token", lastRequest(t, srv, false).Authorization)

	c, err = inClusterConfig(env(map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}), dir)
	require.NoError(t, err)
	assert.Equal(t, "https://[fd00::1]:443", c.Host)

	_, err = inClusterConfig(env(map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"}), dir)
	assert.ErrorIs(t, err, ErrNotInCluster)
	_, err = inClusterConfig(env(vars), t.TempDir())
	assert.ErrorContains(t, err, "bearer token", "no token mounted")

	// A CA bundle that is not there: the system's roots, as client-go.
	require.NoError(t, os.Remove(filepath.Join(dir, "ca.crt")))
	c, err = inClusterConfig(env(vars), dir)
	require.NoError(t, err)
	assert.Empty(t, c.CAFile)
	_, err = InClusterConfig() // not in a pod here
	assert.Error(t, err)
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agent"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func TestNewClientErrors(t *testing.T) {
	cert, key := selfSigned(t)
	_, otherKey := selfSigned(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	huge := filepath.Join(dir, "huge")
	require.NoError(t, os.WriteFile(huge, []byte(strings.Repeat("t", maxTokenBytes+1)), 0o600))
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, "host is empty"},
		{Config{Host: "ftp://x"}, `scheme "ftp"`},
		{Config{Host: "https://x", CAData: []byte("not pem")}, "CA bundle"},
		{Config{Host: "https://x", CAFile: filepath.Join(dir, "missing")}, "CA bundle"},
		{Config{Host: "https://x", CertData: cert, KeyData: otherKey}, "client certificate"},
		{Config{Host: "https://x", TokenFile: filepath.Join(dir, "missing")}, "bearer token"},
		{Config{Host: "https://x", TokenFile: empty}, "empty"},
		{Config{Host: "https://x", TokenFile: huge}, "over"},
	} {
		_, err := NewClient(tc.c)
		assert.ErrorContains(t, err, tc.want, "%+v", tc.c)
	}
	cl, err := NewClient(Config{Host: "10.0.0.1:6443", CertData: cert, KeyData: key, Token: "static"})
	require.NoError(t, err)
	assert.Equal(t, "https://10.0.0.1:6443", cl.base.String(), "a bare host:port is https")
	tok, err := cl.token.get()
	require.NoError(t, err)
	assert.Equal(t, "static", tok)
}

// A token file that goes missing for a moment (being replaced) keeps the
// last token; a 401 makes the file be read again even when it looks the
// same.
func TestTokenSource(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	writeTokenFile(t, file, "t1")
	ts := &tokenSource{file: file}
	tok, err := ts.get()
	require.NoError(t, err)
	assert.Equal(t, "t1", tok)
	require.NoError(t, os.Remove(file))
	tok, err = ts.get()
	require.NoError(t, err)
	assert.Equal(t, "t1", tok)

	writeTokenFile(t, file, "t2")
	fi, err := os.Stat(file)
	require.NoError(t, err)
	ts.fi, ts.tok = fi, "stale" // as if t2 had been cached under this file's identity
	tok, _ = ts.get()
	assert.Equal(t, "stale", tok, "an unchanged file is not read again")
	ts.reset()
	tok, _ = ts.get()
	assert.Equal(t, "t2", tok)
}

// The API server's Status on an error is in the error.
func TestStatusError(t *testing.T) {
	srv := fakeapi.New(t, "right")
	cl := client(t, srv, Config{Token: "wrong"})
	defer cl.CloseIdleConnections()
	_, err := cl.get(context.Background(), podsPath, nil, acceptList)
	var s *StatusError
	require.ErrorAs(t, err, &s)
	assert.Equal(t, http.StatusUnauthorized, s.Code)
	assert.Equal(t, "401 Unauthorized (Unauthorized): Unauthorized", err.Error())
	assert.False(t, isGone(err))
	assert.True(t, isGone(&StatusError{Code: http.StatusGone}))
}
