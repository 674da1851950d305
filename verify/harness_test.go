package verify

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// addFile is a git diff adding path with the given lines.
func addFile(path string, lines ...string) string {
	var b strings.Builder
	b.WriteString("diff --git a/" + path + " b/" + path + "\nnew file mode 100644\n--- /dev/null\n+++ b/" + path + "\n")
	b.WriteString("@@ -0,0 +1," + strconv.Itoa(len(lines)) + " @@\n")
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}

const fixOps = `diff --git a/calc/ops.py b/calc/ops.py
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -1,3 +1,3 @@
 def div(a, b):
-    return a // b
+    return a / b
 
`

// The real setup.cfg hunks of pylint-dev__pylint-4661's gold patch
// (SWE-bench Verified): [options], [isort] and a new [mypy-appdirs]
// section, none of them pytest's although one hunk header names pytest's
// "markers =" key.
const pylint4661SetupCfg = `diff --git a/setup.cfg b/setup.cfg
index 62a3fd7a5f..146f9e69bb 100644
--- a/setup.cfg
+++ b/setup.cfg
@@ -42,6 +42,7 @@ project_urls =
 [options]
 packages = find:
 install_requires =
+    appdirs>=1.4.0
     astroid>=2.6.5,<2.7 # (You should also upgrade requirements_test_min.txt)
     isort>=4.2.5,<6
     mccabe>=0.6,<0.7
@@ -74,7 +75,7 @@ markers =
 [isort]
 multi_line_output = 3
 line_length = 88
-known_third_party = astroid, sphinx, isort, pytest, mccabe, six, toml
+known_third_party = appdirs, astroid, sphinx, isort, pytest, mccabe, six, toml
 include_trailing_comma = True
 skip_glob = tests/functional/**,tests/input/**,tests/extensions/data/**,tests/regrtest_data/**,tests/data/**,astroid/**,venv/**
 src_paths = pylint
@@ -82,6 +83,9 @@ src_paths = pylint
 [mypy]
 scripts_are_modules = True
 
+[mypy-appdirs]
+ignore_missing_imports = True
+
 [mypy-astroid.*]
 ignore_missing_imports = True
 
`

// The real package.json hunk of diegomura__react-pdf-1285's gold patch
// (SWE-bench Multimodal): dependency versions, the "dependencies" key in the
// hunk.
const reactPDF1285 = `diff --git a/packages/fontkit/package.json b/packages/fontkit/package.json
index ff35e6756..cd2ac3275 100644
--- a/packages/fontkit/package.json
+++ b/packages/fontkit/package.json
@@ -23,9 +23,9 @@
   "dependencies": {
     "@react-pdf/unicode-properties": "^2.4.1",
     "brotli": "^1.2.0",
-    "clone": "^1.0.1",
+    "clone": "^1.0.4",
     "deep-equal": "^1.0.0",
-    "dfa": "^1.0.0",
+    "dfa": "1.1.0",
     "restructure": "^0.5.3",
     "tiny-inflate": "^1.0.2",
     "unicode-trie": "^0.3.0"
`

// The real hunk of Automattic__wp-calypso-21635 (SWE-bench Multimodal): a
// dependency added with no key of its object in the hunk.
const calypso21635 = `diff --git a/package.json b/package.json
index cb537a047e299b..8fc3d2c82aaa9e 100644
--- a/package.json
+++ b/package.json
@@ -50,6 +50,7 @@
     "cookie": "0.1.2",
     "cookie-parser": "1.3.2",
     "copy-webpack-plugin": "4.0.1",
+    "cpf": "1.0.0",
     "create-react-class": "15.6.2",
     "creditcards": "2.1.2",
     "cross-env": "5.1.1",
`

const djangoEval = `#!/bin/bash
set -uxo pipefail
cd /testbed
python setup.py install
git checkout abc tests/validators/tests.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/validators/tests.py b/tests/validators/tests.py
--- a/tests/validators/tests.py
+++ b/tests/validators/tests.py
@@ -1 +1 @@
-x = "django/core/validators.py"
+y = "docs/index.txt"
EOF_114329324912
: '>>>>> Start Test Output'
./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 validators.tests
: '>>>>> End Test Output'
git checkout abc tests/validators/tests.py
`

const djangoTestPatch = `diff --git a/tests/validators/tests.py b/tests/validators/tests.py
--- a/tests/validators/tests.py
+++ b/tests/validators/tests.py
@@ -1 +1 @@
-x = 1
+x = 2
`

// TestHarnessChanges: which files of a patch change the test harness, per
// language and per way of writing a patch GNU patch accepts.
func TestHarnessChanges(t *testing.T) {
	conftestPrinter := addFile("conftest.py", "import atexit", "atexit.register(print, 'PASSED x')")
	for _, tc := range []struct {
		name             string
		patch, testPatch string
		evalScript       string
		want             []string
		reasonContains   string
	}{
		{name: "a plain fix", patch: fixOps},
		{name: "conftest.py at the root", patch: fixOps + conftestPrinter, want: []string{"conftest.py"}, reasonContains: "conftest"},
		{name: "conftest.py the test patch also sets", patch: fixOps + conftestPrinter, testPatch: addFile("conftest.py", "x = 1")},
		{name: "conftest.py in a test directory", patch: addFile("tests/conftest.py", "pass"), want: []string{"tests/conftest.py"}},
		{name: "conftest.py removed", patch: "diff --git a/tests/conftest.py b/tests/conftest.py\ndeleted file mode 100644\n--- a/tests/conftest.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-import pytest\n", want: []string{"tests/conftest.py"}},
		{name: "renamed to conftest.py", patch: "diff --git a/helpers.py b/tests/conftest.py\nsimilarity index 100%\nrename from helpers.py\nrename to tests/conftest.py\n", want: []string{"tests/conftest.py"}},
		{name: "pytest.py shadowing pytest", patch: addFile("pytest.py", "import sys", "sys.exit(0)"), want: []string{"pytest.py"}, reasonContains: "shadows"},
		{name: "a _pytest package", patch: addFile("_pytest/__init__.py", "pass"), want: []string{"_pytest/__init__.py"}},
		{name: "sitecustomize and usercustomize", patch: addFile("sitecustomize.py", "pass") + addFile("lib/usercustomize.py", "pass"), want: []string{"lib/usercustomize.py", "sitecustomize.py"}},
		{name: "a .pth file", patch: addFile("src/zz.pth", "import os"), want: []string{"src/zz.pth"}},
		{name: "pytest.ini", patch: addFile("pytest.ini", "[pytest]", "addopts = -p no:cacheprovider"), want: []string{"pytest.ini"}},
		{name: "setup.cfg outside pytest's section (pylint-4661)", patch: pylint4661SetupCfg},
		{name: "setup.cfg in [tool:pytest]", patch: "--- a/setup.cfg\n+++ b/setup.cfg\n@@ -1,3 +1,3 @@\n [tool:pytest]\n-addopts = -ra\n+addopts = -ra -p myplugin\n testpaths = tests\n", want: []string{"setup.cfg"}, reasonContains: "[tool:pytest]"},
		{name: "setup.cfg, a [tool:pytest] section added", patch: "--- a/setup.cfg\n+++ b/setup.cfg\n@@ -1,2 +1,4 @@\n [metadata]\n name = x\n+[tool:pytest]\n+addopts = -p myplugin\n", want: []string{"setup.cfg"}},
		{name: "setup.cfg, section not shown", patch: "--- a/setup.cfg\n+++ b/setup.cfg\n@@ -10,2 +10,2 @@\n-addopts = -ra\n+addopts = -ra -p myplugin\n x = 1\n", want: []string{"setup.cfg"}, reasonContains: "does not show"},
		{name: "setup.cfg, section in the hunk header", patch: "--- a/setup.cfg\n+++ b/setup.cfg\n@@ -10,2 +10,2 @@ [flake8]\n-max-line-length = 80\n+max-line-length = 100\n x = 1\n"},
		{name: "tox.ini [testenv]", patch: "--- a/tox.ini\n+++ b/tox.ini\n@@ -1,2 +1,2 @@\n [testenv]\n-commands = pytest\n+commands = python -c 'print(1)'\n", want: []string{"tox.ini"}},
		{name: "tox.ini [flake8]", patch: "--- a/tox.ini\n+++ b/tox.ini\n@@ -1,2 +1,2 @@\n [flake8]\n-max-line-length = 80\n+max-line-length = 100\n"},
		{name: "pyproject.toml pytest options", patch: "--- a/pyproject.toml\n+++ b/pyproject.toml\n@@ -1,2 +1,3 @@\n [tool.pytest.ini_options]\n addopts = \"-ra\"\n+python_files = [\"*.py\"]\n", want: []string{"pyproject.toml"}},
		{name: "pyproject.toml dependencies", patch: "--- a/pyproject.toml\n+++ b/pyproject.toml\n@@ -1,3 +1,3 @@\n [project]\n-dependencies = [\"a<2\"]\n+dependencies = [\"a<3\"]\n name = \"x\"\n"},
		{name: "package.json test script", patch: "--- a/package.json\n+++ b/package.json\n@@ -3,3 +3,3 @@\n   \"scripts\": {\n-    \"test\": \"jest\",\n+    \"test\": \"node fake.js\",\n     \"build\": \"tsc\"\n", want: []string{"package.json"}, reasonContains: `"scripts"`},
		{name: "package.json jest member added", patch: "--- a/package.json\n+++ b/package.json\n@@ -3,2 +3,3 @@\n   \"name\": \"x\",\n+  \"jest\": {\"setupFiles\": [\"./fake.js\"]},\n   \"version\": \"1.0.0\"\n", want: []string{"package.json"}},
		{name: "package.json dependencies (react-pdf-1285)", patch: reactPDF1285},
		{name: "package.json dependency, key not shown (wp-calypso-21635)", patch: calypso21635},
		{name: "package.json unknown member, not a version", patch: "--- a/package.json\n+++ b/package.json\n@@ -50,2 +50,2 @@\n     \"lint\": \"eslint .\",\n-    \"test\": \"jest\"\n+    \"test\": \"echo ok\"\n", want: []string{"package.json"}, reasonContains: "does not show"},
		{name: "jest and mocha configuration", patch: addFile("jest.config.js", "module.exports = {}") + addFile("test/.mocharc.yml", "require: x"), want: []string{"jest.config.js", "test/.mocharc.yml"}},
		{name: "Go TestMain in a non-test file", patch: addFile("pkg/main_hook.go", "package pkg", "func TestMain(m *testing.M) { os.Exit(0) }"), want: []string{"pkg/main_hook.go"}, reasonContains: "TestMain"},
		{name: "Go TestMain in a test file the test patch does not set", patch: addFile("pkg/x_test.go", "package pkg", "func TestMain(m *testing.M) { os.Exit(0) }"), want: []string{"pkg/x_test.go"}},
		{name: "Go fix without TestMain", patch: addFile("pkg/x.go", "package pkg", "func Fix() {}")},
		{name: ".git/config through patch's own header", patch: "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1,3 @@\n [core]\n+[diff]\n+\texternal = /tmp/x\n", want: []string{".git/config"}, reasonContains: ".git"},
		{name: ".git hooks", patch: addFile(".git/hooks/post-checkout", "#!/bin/sh"), want: []string{".git/hooks/post-checkout"}},
		{name: "the scripts the eval script runs (django)", patch: addFile("tests/runtests.py", "print('OK')") + addFile("setup.py", "pass") + addFile("docs/index.txt", "x"), testPatch: djangoTestPatch, evalScript: djangoEval,
			want: []string{"setup.py", "tests/runtests.py"}, reasonContains: "eval script"},
		{name: "sympy's bin/test", patch: "--- a/bin/test\n+++ b/bin/test\n@@ -1 +1 @@\n-x\n+y\n", evalScript: "#!/bin/bash\nPYTHONWARNINGS='ignore::UserWarning' bin/test -C --verbose sympy/x/tests/test_y.py\n", want: []string{"bin/test"}},
		{name: "files the eval script only names (jq's touch, a git diff path)", patch: addFile("src/parser.y", "x") + addFile("package.json", "{}"),
			evalScript: "#!/bin/bash\ntouch src/parser.y src/lexer.l\nif ! git diff --quiet HEAD -- package.json; then yarn install; fi\nmake -j$(nproc)\n"},
		{name: "a runner reached through cd (micropython)", patch: addFile("tests/run-tests.py", "print('ok')") + addFile("tools/ci.sh", "true"),
			evalScript: "#!/bin/bash\nsource ./tools/ci.sh\n(cd tests && MICROPY_CPYTHON3=python3 ./run-tests.py -i basics/fun) | cat\n",
			want:       []string{"tests/run-tests.py", "tools/ci.sh"}},
		{name: "context diff", patch: "*** a/conftest.py\t2020-01-01\n--- b/conftest.py\t2020-01-01\n***************\n*** 0 ****\n--- 1,2 ----\n+ import atexit\n+ atexit.register(print, 'PASSED')\n", want: []string{"conftest.py"}},
		{name: "Index: line of a normal diff", patch: "Index: conftest.py\n0a1\n> import atexit\n", want: []string{"conftest.py"}},
		{name: "C-quoted git names", patch: "diff --git \"a/con\\146test.py\" \"b/con\\146test.py\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/con\\146test.py\"\n@@ -0,0 +1 @@\n+x = 1\n", want: []string{"conftest.py"}},
		{name: "a removed '-- x' and added '++ y' line are not headers", patch: "--- a/db/schema.sql\n+++ b/db/schema.sql\n@@ -1,2 +1,2 @@\n--- old comment\n+++ b/conftest.py\n select 1;\n"},
		{name: "text between files (GNU patch skips it)", patch: "This patch fixes div.\n\n" + fixOps + "\nand adds\n\n" + conftestPrinter, want: []string{"conftest.py"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := HarnessChanges(tc.patch, tc.testPatch, tc.evalScript)
			paths := HarnessPaths(got)
			if len(paths) == 0 {
				paths = nil
			}
			if !reflect.DeepEqual(paths, tc.want) {
				t.Fatalf("harness files %q, want %q (%+v)", paths, tc.want, got)
			}
			for _, f := range got {
				if f.Reason == "" {
					t.Errorf("%s: no reason", f.Path)
				}
			}
			if tc.reasonContains != "" && !strings.Contains(got[0].Reason, tc.reasonContains) {
				t.Errorf("reason %q does not say %q", got[0].Reason, tc.reasonContains)
			}
		})
	}
}
