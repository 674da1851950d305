package render

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
)

// repoScriptListCommon ports make_repo_script_list_common (every language
// but Python): clone, reset, then the spec's pre_install, install and build.
func repoScriptListCommon(rec *spec.Recipe, inst *core.Instance) []string {
	s := &rec.Spec
	cmds := make([]string, 0, 5+len(s.PreInstall)+len(s.InstallCmds)+len(s.Build))
	cmds = append(cmds,
		"git clone -o origin https://github.com/"+inst.Repo+" "+repoDirectory,
		"chmod -R 777 "+repoDirectory,
		"cd "+repoDirectory,
		"git reset --hard "+inst.BaseCommit,
		"git remote remove origin",
	)
	cmds = append(cmds, s.PreInstall...)
	cmds = append(cmds, s.InstallCmds...)
	return append(cmds, s.Build...)
}

// envScriptListCommon ports make_env_script_list_common: apt-get lines when
// the spec has apt-pkgs, else nothing.
func envScriptListCommon(rec *spec.Recipe) []string {
	if rec.Spec.AptPkgs == nil {
		return []string{}
	}
	return []string{"apt-get update", "apt-get install -y " + strings.Join(rec.Spec.AptPkgs, " ")}
}

// evalScriptListCommon ports make_eval_script_list_common and, for
// JavaScript, make_eval_script_list_js (image-asset downloads after the
// reset line; per-repo test command functions).
func (r *Renderer) evalScriptListCommon(rec *spec.Recipe, inst *core.Instance) ([]string, error) {
	t := r.Tables
	s := &rec.Spec
	files, err := modifiedFiles(inst.TestPatch)
	if err != nil {
		return nil, err
	}
	reset := `echo "No test files to reset"`
	if len(files) > 0 {
		reset = "git checkout " + inst.BaseCommit + " " + strings.Join(files, " ")
	}
	testCmds := s.TestCmds
	var assets []string
	if rec.Language == spec.LangJS {
		if assets, err = downloadImageCommands(inst.ImageAssets); err != nil {
			return nil, fmt.Errorf("image_assets: %w", err)
		}
		if fn, ok := t.RepoTestCmds[inst.Repo]; ok {
			if testCmds, err = repoTestCmds(fn, inst); err != nil {
				return nil, err
			}
		}
	}
	cmds := make([]string, 0, 10+len(assets)+len(s.Build)+len(testCmds))
	cmds = append(cmds,
		"cd "+repoDirectory,
		"git config --global --add safe.directory "+repoDirectory,
		"cd "+repoDirectory,
		reset,
	)
	cmds = append(cmds, assets...)
	cmds = append(cmds, "git apply --verbose --reject - <<'"+t.HeredocEvalCommon+"'\n"+inst.TestPatch+"\n"+t.HeredocEvalCommon)
	cmds = append(cmds, s.Build...)
	cmds = append(cmds, ": '"+t.StartTestOutput+"'")
	cmds = append(cmds, testCmds...)
	return append(cmds, ": '"+t.EndTestOutput+"'", reset), nil
}

// imageAsset is one entry of a record's image_assets.test_patch.
type imageAsset struct {
	Path string `json:"path"`
	URL  string `json:"url"`
}

// downloadImageCommands ports get_download_img_commands: for each
// image_assets["test_patch"] entry, mkdir -p its folder, curl -o it, chmod
// 777 it. raw is the record's image_assets (a JSON object, or a string
// holding one); "" means the record has none.
func downloadImageCommands(raw string) ([]string, error) {
	if raw == "" {
		return nil, nil
	}
	var assets struct {
		TestPatch []imageAsset `json:"test_patch"`
	}
	if err := json.Unmarshal([]byte(raw), &assets); err != nil {
		return nil, err
	}
	cmds := make([]string, 0, 3*len(assets.TestPatch))
	for _, a := range assets.TestPatch {
		cmds = append(cmds,
			"mkdir -p "+purePosixParent(a.Path),
			"curl -o "+a.Path+" "+a.URL,
			"chmod 777 "+a.Path,
		)
	}
	return cmds, nil
}

// purePosixParent is str(pathlib.Path(p).parent) on POSIX: empty and "."
// parts and repeated slashes are dropped (".." is kept), the last part
// removed; "." when nothing is left of a relative path.
func purePosixParent(p string) string {
	abs := strings.HasPrefix(p, "/")
	var parts []string
	for _, part := range strings.Split(p, "/") {
		if part != "" && part != "." {
			parts = append(parts, part)
		}
	}
	if len(parts) > 0 {
		parts = parts[:len(parts)-1]
	}
	dir := strings.Join(parts, "/")
	switch {
	case abs && strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "///"):
		// POSIX keeps exactly two leading slashes.
		return "//" + dir
	case abs:
		return "/" + dir
	case dir == "":
		return "."
	}
	return dir
}

// repoTestCmds runs the test command function upstream's
// MAP_REPO_TO_TEST_CMDS names for the repo.
func repoTestCmds(fn string, inst *core.Instance) ([]string, error) {
	switch fn {
	case "get_test_cmds_calypso":
		return testCmdsCalypso(inst)
	}
	return nil, fmt.Errorf("repo %s: test command function %s is not implemented", inst.Repo, fn)
}

var calypsoSnapshot = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`__snapshots__/(.*).js.snap$`) })

// testCmdsCalypso ports get_test_cmds_calypso: one command (or three for
// test/e2e) per file of the test patch, by the file's top folder and the
// instance's version.
func testCmdsCalypso(inst *core.Instance) ([]string, error) {
	files, err := parsePatchSet(inst.TestPatch)
	if err != nil {
		return nil, err
	}
	var cmds []string
	for _, f := range files {
		p := f.path()
		if calypsoSnapshot().MatchString(p) {
			// Jest snapshots are not run directly.
			parts := strings.Split(p, "/")
			if len(parts) >= 2 {
				parts = parts[:len(parts)-2]
			} else {
				parts = nil
			}
			p = strings.Join(parts, "/")
		}
		switch {
		case strings.HasPrefix(p, "client") || strings.HasPrefix(p, "packages"):
			pkg := strings.SplitN(p, "/", 2)[0]
			switch inst.Version {
			case "10.10.0", "10.12.0", "10.13.0", "10.14.0", "10.15.2", "10.16.3":
				cmds = append(cmds, "./node_modules/.bin/jest --verbose -c=test/"+pkg+"/jest.config.js '"+p+"'")
			case "6.11.5", "8.9.1", "8.9.3", "8.9.4", "8.11.0", "8.11.2", "10.4.1", "10.5.0", "10.6.0", "10.9.0":
				cmds = append(cmds, "./node_modules/.bin/jest --verbose -c=test/"+pkg+"/jest.config.json '"+p+"'")
			default:
				cmds = append(cmds, "npm run test-"+pkg+" --verbose '"+p+"'")
			}
		case strings.HasPrefix(p, "test/e2e"):
			cmds = append(cmds, "cd test/e2e", "NODE_CONFIG_ENV=test npm run test "+p, "cd ../..")
		}
	}
	if cmds == nil {
		cmds = []string{}
	}
	return cmds, nil
}
