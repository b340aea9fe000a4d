package container

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// whoamiEnv makes this test binary, mounted into an image's container,
// print the user and group it runs as and exit: the images have no shell
// and no id(1) to ask.
const whoamiEnv = "OTELCOL_GPU_IMAGE_TEST_WHOAMI"

func TestMain(m *testing.M) {
	if os.Getenv(whoamiEnv) == "1" {
		fmt.Printf("uid=%d gid=%d\n", os.Getuid(), os.Getgid())
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
