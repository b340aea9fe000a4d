package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// twoReplicas is the fixture's console as the standby (gw-1) and a second
// console, the owner (gw-0), holding the same node.
func twoReplicas(t *testing.T) (standby, owner *fixture) {
	t.Helper()
	standby = newFixture(t)
	owner = newFixture(t)
	gw0 := ownership.Member{Name: "gw-0", Console: owner.url}
	gw1 := ownership.Member{Name: "gw-1", Console: standby.url}
	standby.ctrl.SetRole(console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleStandby, Self: gw1, Owner: gw0}})
	owner.ctrl.SetRole(console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleOwner, Self: gw0, Owner: gw0}})
	return standby, owner
}

func (f *fixture) runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(append([]string{"--token-file", f.tokenFile}, args...), &o, &e)
	return code, o.String(), e.String()
}

// With both servers every command finds the owner: status shows both
// roles, a release goes to the owner only.
func TestSeveralServersFindTheOwner(t *testing.T) {
	standby, owner := twoReplicas(t)
	servers := []string{"--server", standby.url, "--server", owner.url}

	code, out, errOut := standby.runArgs(t, append(servers, "status")...)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^`+standby.url+`\s+standby\s+gw-1\s+gw-0\s+9.9.9\s+1$`, out)
	assert.Regexp(t, `(?m)^`+owner.url+`\s+owner\s+gw-0\s+gw-0\s+9.9.9\s+1$`, out)

	code, out, _ = standby.runArgs(t, append(servers, "--json", "status")...)
	require.Equal(t, 0, code)
	var all struct {
		Servers []struct {
			Server string `json:"server"`
			Status struct {
				Role string `json:"role"`
			} `json:"status"`
		} `json:"servers"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &all), out)
	require.Len(t, all.Servers, 2)
	assert.Equal(t, "standby", all.Servers[0].Status.Role)
	assert.Equal(t, "owner", all.Servers[1].Status.Role)

	code, out, errOut = standby.runArgs(t, append(servers, "release", "node-3", "--reason", "RMA done")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "released node node-3")
	assert.Empty(t, standby.ctrl.Calls(), "the standby is never asked")
	require.Len(t, owner.ctrl.Calls(), 1)
	assert.Equal(t, "Release", owner.ctrl.Calls()[0].Method)

	// The environment's list, comma-separated, the same way.
	t.Setenv(envServer, standby.url+","+owner.url)
	code, out, errOut = standby.run(t, "breaker", "reset", "--reason", "checked")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "breaker reset by tester")
	assert.Len(t, owner.ctrl.Calls(), 2)
	assert.Empty(t, standby.ctrl.Calls())

	// The standby alone: its refusal names the owner, with the hint.
	code, _, errOut = standby.runArgs(t, "--server", standby.url, "release", "node-3", "--reason", "x")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "gw-1 is a standby and never acts: gw-0 owns gpu_faults and acts; send controls to its console "+owner.url+" (HTTP 409)")
	assert.Contains(t, errOut, "hint: pass every replica's console")
	code, out, _ = standby.runArgs(t, "--server", standby.url, "status")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^role\s+standby: gw-0 acts, its console `+owner.url+` \(election gpu_faults\)$`, out)

	// No owner among them: an error saying what each said.
	owner.ctrl.SetRole(console.Role{Election: console.ElectionGPUFaults, Status: ownership.Status{Role: ownership.RoleElecting}})
	code, _, errOut = standby.runArgs(t, append(servers, "nodes")...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no server is the owner of gpu_faults ("+standby.url+": standby, names gw-0 as the owner; "+owner.url+": electing)")

	// Jobs from every server, once each.
	code, out, _ = standby.runArgs(t, append(servers, "jobs")...)
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^llama\s+2\s+16\s+`, out)
}

// --all-addresses asks each address of the name.
func TestAllAddresses(t *testing.T) {
	f := newFixture(t)
	u, err := url.Parse(f.url)
	require.NoError(t, err)
	code, out, errOut := f.runArgs(t, "--server", "http://localhost:"+u.Port(), "--all-addresses", "status")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "http://localhost:"+u.Port()+" [127.0.0.1:"+u.Port()+"]")
	assert.Regexp(t, `\[127\.0\.0\.1:`+u.Port()+`\]\s+owner\s+`, out)

	code, _, errOut = f.runArgs(t, "--server", "ftp://x", "status")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `console URL "ftp://x" must be http://host:port or https://host:port`)
	code, _, errOut = f.runArgs(t, "--ca-file", "/nonexistent", "status")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--ca-file: open /nonexistent")
}
