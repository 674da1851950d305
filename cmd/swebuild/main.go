// Command swebuild turns a SWE-bench-format dataset into verified, published,
// multi-arch evaluation images. This file only wires subcommands; each
// subcommand lives in its own file and delegates to a package.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	clog "github.com/containerd/log"
	"github.com/sirupsen/logrus"

	"github.com/swebuild/swebuild/core"
)

// command is one subcommand: run gets the arguments after the subcommand name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// errUsage marks an error already reported with usage; exit status 2.
var errUsage = errors.New("usage")

func commands() []command {
	return []command{
		{"render", "write Dockerfiles and scripts for instances", runRender},
		{"plan", "print the base/env/instance image graph per platform", runPlan},
		{"pins", "list the pin rules applied on top of upstream specs", runPins},
		{"grade", "grade a test log exactly as upstream SWE-bench does", runGrade},
		{"build", "build images with BuildKit", runBuild},
		{"verify", "run gold (or predicted) patches through the graded test flow", runVerify},
		{"publish", "push built images by digest and write multi-arch indexes", runPublish},
		{"check", "check that a dataset's published images are all in a registry", runCheck},
		{"sizes", "compare image set sizes", runSizes},
		{"drift", "compare the resolved environments of two publications", runDrift},
		{"diff-images", "compare two images file by file (reproducible builds)", runDiffImages},
		{"ci", "helpers for the nightly GitHub Actions workflow", runCI},
		{"sign", "make the key pair that signs attached statements", runSign},
		{"version", "print the swebuild version", runVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: swebuild COMMAND [OPTIONS]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	cmds := commands()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'swebuild COMMAND --help' for more information on a command.")
}

func main() {
	quietContainerdLog()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// quietContainerdLog keeps containerd's own warnings off the terminal:
// its content store (the OCI layout of build --output, verify's oci-layout
// source) warns on every open that the file system has no fs-verity, which
// is nothing the user can act on. Errors still show.
func quietContainerdLog() {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.ErrorLevel)
	clog.L = logrus.NewEntry(l)
}

func run(args []string, stdout, stderr io.Writer) int {
	stdout, stderr = core.SyncWriter(stdout), core.SyncWriter(stderr)
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help":
		usage(stdout)
		return 0
	case "-v", "--version":
		args = []string{"version"}
	case "help":
		// swebuild help CMD [SUB] is swebuild CMD [SUB] --help.
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		args = append(append([]string(nil), args[1:]...), "--help")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var up usageProblem
		switch {
		case err == nil:
			return 0
		case errors.As(err, &up):
			// Not printed yet (a library said what is wrong with the flags).
			fmt.Fprintf(stderr, "swebuild %s: %v\nSee 'swebuild %s --help'.\n", c.name, up.error, c.name)
			return 2
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(stderr, "swebuild %s: %v\n", c.name, err)
			return 1
		}
	}
	msg := fmt.Sprintf("swebuild: unknown command %q", args[0])
	if strings.HasPrefix(args[0], "-") {
		msg = fmt.Sprintf("swebuild: unknown flag %q (flags come after the command: swebuild COMMAND [OPTIONS])", args[0])
	} else if s := suggestCommand(args[0]); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	fmt.Fprintf(stderr, "%s\nSee 'swebuild --help'.\n", msg)
	return 2
}

// suggestCommand is the command nearest to name (edit distance at most 2,
// or a prefix), "" when none is.
func suggestCommand(name string) string {
	for _, c := range commands() {
		if editDistance(name, c.name) <= 2 || len(name) >= 3 && strings.HasPrefix(c.name, name) {
			return c.name
		}
	}
	return ""
}

// runGroup dispatches `swebuild NAME COMMAND ...` to the command of cmds
// named by args[0]; --help lists them under what. required names the
// commands in the error when none is given.
func runGroup(ctx context.Context, name, what, required string, cmds []command, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "swebuild %s: a command is required (%s)\nSee 'swebuild %s --help'.\n", name, required, name)
		return errUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprintf(stdout, "Usage: swebuild %s COMMAND [OPTIONS]\n\n%s\n\nCommands:\n", name, what)
		for _, c := range cmds {
			fmt.Fprintf(stdout, "  %-9s %s\n", c.name, c.summary)
		}
		return nil
	}
	for _, c := range cmds {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "swebuild %s: unknown command %q\nSee 'swebuild %s --help'.\n", name, args[0], name)
	return errUsage
}
