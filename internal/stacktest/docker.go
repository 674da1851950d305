package stacktest

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// EnvDockerHost is the address of the stack's Docker daemon
// (scripts/stack.sh docker up; scripts/stack.sh docker env prints it), e.g.
// unix:///run/swebuild/docker.sock.
const EnvDockerHost = "SWEBUILD_DOCKER_HOST"

// RequireDocker returns the stack's Docker daemon address from
// SWEBUILD_DOCKER_HOST once the daemon answers /_ping there. When it is unset
// or does not answer the test is skipped, or fails if CI is set.
func RequireDocker(t testing.TB) string {
	t.Helper()
	h := os.Getenv(EnvDockerHost)
	if h == "" {
		missing(t, "the stack's Docker daemon is not configured: %s unset (scripts/stack.sh docker up && eval \"$(scripts/stack.sh docker env)\")", EnvDockerHost)
		return h
	}
	if err := probeOnce("docker "+h, func(ctx context.Context) error { return probeDocker(ctx, h) }); err != nil {
		missing(t, "the stack's Docker daemon (%s) does not answer: %v (scripts/stack.sh docker up)", EnvDockerHost, err)
	}
	return h
}

// DockerCLI returns the path of the docker command (Debian's docker.io
// installs it with the daemon). When it is missing the test is skipped, or
// fails if CI is set.
func DockerCLI(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("docker")
	if err != nil {
		missing(t, "no docker command: %v", err)
	}
	return p
}
