//go:build image

package container

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 31, images into a cluster: make image-push sends the three images
// to a registry (here an OCI distribution registry on loopback, go-
// containerregistry's), writes each digest, and each image is then pulled
// by that digest, the way a node pins it, with its labels intact. Runs
// after TestImages, which built them (image-push rebuilds from buildah's
// layer cache).
func TestImagePushThenPullByDigest(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	dist := t.TempDir()

	push := exec.Command("make", "-C", root, "image-push", "IMAGE_BASE=local", "REGISTRY="+host+"/otelcol-gpu",
		"IMAGE_PUSH_TLS_VERIFY=false", "DIST="+dist)
	out, err := push.CombinedOutput()
	require.NoError(t, err, "make image-push:\n%s", out)

	missing := exec.Command("make", "-C", root, "image-push", "IMAGE_BASE=local")
	out, err = missing.CombinedOutput()
	require.Error(t, err, "image-push without REGISTRY")
	assert.Contains(t, string(out), "image-push: set REGISTRY=")

	for _, im := range images {
		t.Run(im.name, func(t *testing.T) {
			digest, err := os.ReadFile(filepath.Join(dist, im.name+".digest"))
			require.NoError(t, err)
			ref, err := name.ParseReference(host+"/otelcol-gpu/"+im.name+"@"+strings.TrimSpace(string(digest)), name.Insecure)
			require.NoError(t, err)
			img, err := remote.Image(ref)
			require.NoError(t, err, "pull %s", ref)
			got, err := img.Digest()
			require.NoError(t, err)
			assert.Equal(t, strings.TrimSpace(string(digest)), got.String(), "the pulled manifest is the pushed one")
			cfg, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, im.name, cfg.Config.Labels["org.opencontainers.image.title"])
			assert.Equal(t, imageUser, cfg.Config.User)
		})
	}
}
