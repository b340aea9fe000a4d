package faultconsoleextension

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configtls"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoleclient"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

var standbyRole = console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleStandby,
	Self:  ownership.Member{Name: "otelcol-gpu-gateway-1", Console: "https://otelcol-gpu-gateway-1.gw:8787"},
	Owner: ownership.Member{Name: "otelcol-gpu-gateway-0", Console: "https://otelcol-gpu-gateway-0.gw:8787"}}}

var controls = []struct{ path, body string }{
	{"/api/v1/nodes/node-b/release", `{"operator":"alice","reason":"fixed"}`},
	{"/api/v1/breaker/reset", `{"operator":"alice","reason":"checked"}`},
	{"/api/v1/faults/f-xid/ack", `{"operator":"alice"}`},
}

// A standby's status names the owner; its controls are answered 409 with
// the owner, reach no controller and are counted; its reads are served.
func TestAPIStandbyRefusesControls(t *testing.T) {
	f := newFixture(t, true)
	f.ctrl.SetRole(standbyRole)
	var st consoleclient.Status
	f.call(t, "GET", "/api/v1/status", "", 200, &st)
	assert.Equal(t, "standby", st.Role)
	assert.Equal(t, "gpu_faults", st.Election)
	assert.Equal(t, &consoleclient.Member{Name: "otelcol-gpu-gateway-1", Console: "https://otelcol-gpu-gateway-1.gw:8787"}, st.Self)
	assert.Equal(t, &consoleclient.Member{Name: "otelcol-gpu-gateway-0", Console: "https://otelcol-gpu-gateway-0.gw:8787"}, st.Owner)

	for _, c := range controls {
		var e consoleclient.Error
		f.call(t, "POST", c.path, c.body, http.StatusConflict, &e)
		assert.Equal(t, "otelcol-gpu-gateway-1 is a standby and never acts: otelcol-gpu-gateway-0 owns gpu_faults and acts; send controls to its console https://otelcol-gpu-gateway-0.gw:8787", e.Error, c.path)
		assert.Equal(t, "standby", e.Role)
		assert.Equal(t, &consoleclient.Member{Name: "otelcol-gpu-gateway-0", Console: "https://otelcol-gpu-gateway-0.gw:8787"}, e.Owner)
	}
	// A node the standby does not hold is refused the same way, not 404.
	f.wantError(t, "POST", "/api/v1/nodes/node-z/release", `{"operator":"alice","reason":"x"}`, http.StatusConflict, "otelcol-gpu-gateway-0 owns gpu_faults")
	assert.Empty(t, f.ctrl.Calls(), "no control reached the controller")
	assert.Equal(t, map[string]int64{"not_owner": 4}, sumByAttr(t, f.tel, "otelcol_faultconsole_refused_requests", metadata.TelemetryAttrReason))
	assert.Equal(t, 4, f.logs.FilterMessage("faultconsole: control refused: this replica does not act").Len(), "each refusal logged")
	f.call(t, "GET", "/api/v1/nodes", "", 200, nil)
	f.call(t, "GET", "/api/v1/breaker", "", 200, nil)

	electing := console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleElecting}}
	f.ctrl.SetRole(electing)
	var e consoleclient.Error
	f.call(t, "POST", controls[0].path, controls[0].body, http.StatusConflict, &e)
	assert.Equal(t, "electing", e.Role)
	assert.Nil(t, e.Owner, "no owner known")
	assert.Contains(t, e.Error, "in progress")
}

// racingController says it owns, then refuses: the partitions moved
// between the console's question and the control.
type racingController struct{ console.Controller }

func (racingController) Role() console.Role {
	return console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleOwner}}
}

func (racingController) ResetBreaker(context.Context, console.Operator) error {
	return &console.NotOwnerError{Role: standbyRole}
}

func TestAPIControllerRefusalIsConflict(t *testing.T) {
	f := newFixture(t, false)
	f.store.Attach(racingController{f.ctrl})
	var e consoleclient.Error
	f.call(t, "POST", "/api/v1/breaker/reset", controls[1].body, http.StatusConflict, &e)
	assert.Equal(t, "otelcol-gpu-gateway-0", e.Owner.Name)
}

// selfSigned writes a certificate for 127.0.0.1 and its key; it returns
// their paths and a pool trusting it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "faultconsole"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// With tls the console serves HTTPS only, on every address if asked.
func TestStartTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	cfg := testConfig(t)
	cfg.Endpoint = "0.0.0.0:0"
	cfg.TLS = &configtls.ServerConfig{Config: configtls.Config{CertFile: certFile, KeyFile: keyFile}}
	require.NoError(t, cfg.Validate())
	ext, err := newExtension(cfg, nopSettings())
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	_, port, err := net.SplitHostPort(ext.Addr())
	require.NoError(t, err)

	c := &consoleclient.Client{BaseURL: "https://127.0.0.1:" + port, Token: testToken,
		HTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}
	st, _, err := c.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "otelcol-gpu", st.Command)
	c.HTTP.CloseIdleConnections()

	resp, err := http.Get("http://127.0.0.1:" + port + "/api/v1/status")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the TLS listener is refused")

	bad := testConfig(t)
	bad.TLS = &configtls.ServerConfig{Config: configtls.Config{CertFile: filepath.Join(t.TempDir(), "missing.crt"), KeyFile: keyFile}}
	ext2, err := newExtension(bad, nopSettings())
	require.NoError(t, err)
	err = ext2.Start(context.Background(), componenttest.NewNopHost())
	require.ErrorContains(t, err, "faultconsole: tls: ")
	require.NoError(t, ext2.Shutdown(context.Background()))
}
