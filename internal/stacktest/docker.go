package stacktest

import (
	"os"
	"os/exec"
	"testing"
)

// EnvDockerHost is the address of the stack's Docker daemon
// (scripts/stack.sh docker up; scripts/stack.sh docker env prints it), e.g.
// unix:///run/swebuild/docker.sock.
const EnvDockerHost = "SWEBUILD_DOCKER_HOST"

// RequireDocker returns the stack's Docker daemon address from
// SWEBUILD_DOCKER_HOST. When it is unset the test is skipped, or fails if CI
// is set.
func RequireDocker(t testing.TB) string {
	t.Helper()
	h := os.Getenv(EnvDockerHost)
	if h == "" {
		missing(t, "the stack's Docker daemon is not configured: %s unset (scripts/stack.sh docker up && eval \"$(scripts/stack.sh docker env)\")", EnvDockerHost)
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
