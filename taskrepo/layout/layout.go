// Package layout is the shape of an upstream v5 task repo on disk
// (swebench/task/repo.py): the names of its files and sweb.yaml's keys.
// Package taskrepo reads a task repo, builder/render/taskwrite writes one;
// both take the names from here. It imports nothing but the standard
// library.
package layout

// File and directory names of a task repo.
const (
	// ConfigFile is the repo's sweb.yaml (Config).
	ConfigFile = "sweb.yaml"
	// TasksDir holds one directory per task, named by its instance id.
	TasksDir = "tasks"

	// The files of a task's directory.
	TaskFile    = "task.yaml"
	TestsFile   = "tests.json"
	Dockerfile  = "Dockerfile"
	EvalFile    = "eval.sh"
	GoldPatch   = "gold.patch"
	TestPatch   = "test.patch"
	ProblemFile = "problem_statement.md"
	HintsFile   = "hints.md"
)

// Config is sweb.yaml: the datasets and splits the repo publishes.
type Config struct {
	Datasets []string `yaml:"datasets"`
	Splits   []string `yaml:"splits"`
}
