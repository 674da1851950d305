package render

import (
	"strings"

	"github.com/swebuild/swebuild/builder/spec"
	"github.com/swebuild/swebuild/core"
)

const (
	envName       = "testbed"
	repoDirectory = "/testbed"
	condaSource   = "source /opt/miniconda3/bin/activate"
	condaActivate = "conda activate " + envName
)

func (r *Renderer) activate(rec *spec.Recipe) []string {
	if rec.Profile != nil {
		return rec.Profile.Activate
	}
	return []string{condaSource, condaActivate}
}

// repoScriptList ports make_repo_script_list_py.
func (r *Renderer) repoScriptList(rec *spec.Recipe, inst *core.Instance) []string {
	t := r.Tables
	branch := t.Branch(inst.Repo, inst.BaseCommit)
	if branch != "" {
		branch = "--branch " + branch
	}
	url := "https://github.com/" + inst.Repo
	if rec.Profile != nil {
		name := inst.Repo[strings.LastIndexByte(inst.Repo, '/')+1:]
		url = strings.NewReplacer("{repo}", inst.Repo, "{name}", name).Replace(rec.Profile.CloneURL)
	}
	bc := inst.BaseCommit
	cmds := make([]string, 0, 24+len(rec.Spec.PreInstall))
	cmds = append(cmds,
		"git clone -o origin "+branch+" --single-branch "+url+" "+repoDirectory,
		"chmod -R 777 "+repoDirectory,
		"cd "+repoDirectory,
		"git reset --hard "+bc,
		"git remote remove origin",
		"TARGET_TIMESTAMP=$(git show -s --format=%ci "+bc+")",
		`git tag -l | while read tag; do TAG_COMMIT=$(git rev-list -n 1 "$tag"); TAG_TIME=$(git show -s --format=%ci "$TAG_COMMIT"); if [[ "$TAG_TIME" > "$TARGET_TIMESTAMP" ]]; then git tag -d "$tag"; fi; done`,
		"git reflog expire --expire=now --all",
		"git gc --prune=now --aggressive",
		`AFTER_TIMESTAMP=$(date -d "$TARGET_TIMESTAMP + 1 second" '+%Y-%m-%d %H:%M:%S')`,
		`COMMIT_COUNT=$(git log --oneline --all --since="$AFTER_TIMESTAMP" | wc -l)`,
		`[ "$COMMIT_COUNT" -eq 0 ] || exit 1`,
	)
	cmds = append(cmds, r.activate(rec)...)
	if rec.Profile == nil {
		cmds = append(cmds, `echo "Current environment: $CONDA_DEFAULT_ENV"`)
	}
	if v, ok := t.RepoToInstall[inst.Repo]; ok {
		cmds = append(cmds, v)
	}
	cmds = append(cmds, rec.Spec.PreInstall...)
	if rec.Spec.Install != nil {
		cmds = append(cmds, *rec.Spec.Install)
	}
	return append(cmds,
		"git config --global user.email setup@swebench.config",
		"git config --global user.name SWE-bench",
		"git commit --allow-empty -am SWE-bench",
	)
}

// envScriptList ports make_env_script_list_py (and _from_conda for the
// bundled environment.yml files).
func (r *Renderer) envScriptList(rec *spec.Recipe, inst *core.Instance) ([]string, error) {
	t := r.Tables
	s := &rec.Spec
	if rec.Profile != nil {
		cmds := append([]string(nil), rec.Profile.EnvCreate...)
		cmds = append(cmds, rec.Profile.Activate...)
		if s.PipPackages != nil {
			cmds = append(cmds, "python -m pip install "+strings.Join(s.PipPackages, " "))
		}
		return cmds, nil
	}
	if rec.CondaExplicit != "" {
		return frozenEnvScriptList(rec, t.HeredocEnv), nil
	}
	if rec.EnvYMLCached {
		return []string{
			condaSource,
			"cat <<'" + t.HeredocEnv + "' > /root/environment.yml\n" + rec.EnvYML + "\n" + t.HeredocEnv,
			"conda env create -f /root/environment.yml",
			condaActivate,
		}, nil
	}
	cmds := []string{condaSource}
	switch s.Packages {
	case FileRequirements:
		cmds = append(cmds, "conda create -n "+envName+" python="+s.Python+" -y")
		reqs, err := r.file(inst, FileRequirements)
		if err != nil {
			return nil, err
		}
		const path = "$HOME/requirements.txt"
		cmds = append(cmds,
			"cat <<'"+t.HeredocEnv+"' > "+path+"\n"+reqs+"\n"+t.HeredocEnv,
			"conda activate "+envName+" && python -m pip install -r "+path,
			"rm "+path)
	case FileEnvironmentYML:
		yml, err := r.file(inst, FileEnvironmentYML)
		if err != nil {
			return nil, err
		}
		const path = "environment.yml"
		cmds = append(cmds, "cat <<'"+t.HeredocEnv+"' > "+path+"\n"+yml+"\n"+t.HeredocEnv)
		if s.NoUseEnv {
			cmds = append(cmds,
				"conda create -c conda-forge -n "+envName+" python="+s.Python+" -y",
				"conda env update -f "+path)
		} else {
			cmds = append(cmds,
				"conda env create --file "+path,
				"conda activate "+envName+" && conda install python="+s.Python+" -y")
		}
		cmds = append(cmds, "rm "+path)
	default:
		cmds = append(cmds, "conda create -n "+envName+" python="+s.Python+" "+s.Packages+" -y")
	}
	cmds = append(cmds, condaActivate)
	if s.PipPackages != nil {
		cmds = append(cmds, "python -m pip install "+strings.Join(s.PipPackages, " "))
	}
	return cmds, nil
}

// frozenEnvScriptList is the env script of a recipe frozen to a captured
// conda environment (rec.CondaExplicit, set by the frozen pin rule): the
// env is created from the explicit spec, written by a heredoc, in place of
// upstream's conda create / conda env create / requirements steps; the
// activation and the pip line (the rule's exact pins) stay upstream's.
func frozenEnvScriptList(rec *spec.Recipe, heredoc string) []string {
	const path = "/root/explicit.txt"
	cmds := []string{
		condaSource,
		"cat <<'" + heredoc + "' > " + path + "\n" + strings.TrimSuffix(rec.CondaExplicit, "\n") + "\n" + heredoc,
		"conda create -n " + envName + " --file " + path + " -y",
		"rm " + path,
		condaActivate,
	}
	if rec.Spec.PipPackages != nil {
		cmds = append(cmds, "python -m pip install --no-deps "+strings.Join(rec.Spec.PipPackages, " "))
	}
	return cmds
}

// evalScriptList ports make_eval_script_list_py.
func (r *Renderer) evalScriptList(rec *spec.Recipe, inst *core.Instance) ([]string, error) {
	t := r.Tables
	s := &rec.Spec
	files, err := modifiedFiles(inst.TestPatch)
	if err != nil {
		return nil, err
	}
	resets := []string{"git checkout " + inst.BaseCommit + " " + strings.Join(files, " ")}
	if t.Version == spec.VersionFinal {
		// #539 (f7bbbb2): check out only files that exist at the base
		// commit, remove the ones the test patch adds.
		if resets, err = resetCommandsFinal(inst.BaseCommit, files, inst.TestPatch); err != nil {
			return nil, err
		}
	}
	directives := testDirectives(inst.Repo, inst.TestPatch, t.NonTestExts)
	n := len(s.TestCmd)
	for _, d := range directives {
		n += 1 + len(d)
	}
	var tc strings.Builder
	tc.Grow(n)
	tc.WriteString(s.TestCmd)
	for _, d := range directives {
		tc.WriteByte(' ')
		tc.WriteString(d)
	}
	act := r.activate(rec)
	cmds := make([]string, 0, 20+len(s.EvalCommands))
	cmds = append(cmds, act...)
	cmds = append(cmds, "cd "+repoDirectory)
	cmds = append(cmds, s.EvalCommands...)
	cmds = append(cmds,
		"git config --global --add safe.directory "+repoDirectory,
		"cd "+repoDirectory,
		"git status",
		"git show",
		"git -c core.fileMode=false diff "+inst.BaseCommit)
	cmds = append(cmds, act...)
	if s.Install != nil {
		cmds = append(cmds, *s.Install)
	}
	cmds = append(cmds, resets...)
	cmds = append(cmds,
		"git apply -v - <<'"+t.HeredocEval+"'\n"+inst.TestPatch+"\n"+t.HeredocEval,
		": '"+t.StartTestOutput+"'",
		tc.String(),
		": '"+t.EndTestOutput+"'",
	)
	return append(cmds, resets...), nil
}

// resetCommandsFinal is the test-file reset of make_eval_script_list_py at
// 2514c86: `git checkout <base> <modified>` when the patch modifies files,
// `rm -f <added>` when it adds some (targets without "b/").
func resetCommandsFinal(baseCommit string, modified []string, testPatch string) ([]string, error) {
	added, err := newFiles(testPatch)
	if err != nil {
		return nil, err
	}
	var out []string
	if len(modified) > 0 {
		out = append(out, "git checkout "+baseCommit+" "+strings.Join(modified, " "))
	}
	if len(added) > 0 {
		out = append(out, "rm -f "+strings.Join(added, " "))
	}
	return out, nil
}

// joinScript is "\n".join(["#!/bin/bash", header] + list) + "\n".
func joinScript(header string, list []string) string {
	n := len("#!/bin/bash\n") + len(header) + 2
	for _, s := range list {
		n += len(s) + 1
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString("#!/bin/bash\n")
	b.WriteString(header)
	for _, s := range list {
		b.WriteByte('\n')
		b.WriteString(s)
	}
	b.WriteByte('\n')
	return b.String()
}
