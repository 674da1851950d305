#!/usr/bin/env python3
"""Recompute the "want"/"requested" fields of upstream_v4.1.0_golden.json.

Runs upstream SWE-bench v4.1.0's own functions, unmodified, on the inputs of
each case. Usage (python.py from a checkout of SWE-bench at tag v4.1.0):

    python3 upstream_golden.py swebench/harness/test_spec/python.py \
        upstream_v4.1.0_golden.json > new.json

The functions are taken from the module by name (clean_environment_yml,
clean_requirements, get_requirements_by_commit, get_environment_yml_by_commit,
REPLACE_REQ_PACKAGES) without importing the swebench package; requests.get is
replaced by a lookup in the case's "files" that records the URLs asked for.
"""
import ast, json, os, posixpath, re, sys

src = open(sys.argv[1]).read()
ns = {"re": re, "os": os, "posixpath": posixpath, "HEADERS": {},
      "SWE_BENCH_URL_RAW": "https://raw.githubusercontent.com/",
      "MAP_REPO_TO_REQS_PATHS": {"o/r": ["reqs/dev.txt", "req.txt"], "o/flat": ["requirements_test.txt"]},
      "MAP_REPO_TO_ENV_YML_PATHS": {"o/r": ["ci/environment.yml", "environment.yml"]}}
wanted = {"clean_environment_yml", "clean_requirements", "get_requirements_by_commit", "get_environment_yml_by_commit"}
for node in ast.parse(src).body:
    if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "REPLACE_REQ_PACKAGES" for t in node.targets):
        exec(compile(ast.Module([node], []), "python.py", "exec"), ns)
    if isinstance(node, ast.FunctionDef) and node.name in wanted:
        node.decorator_list = []  # drop functools.cache
        exec(compile(ast.Module([node], []), "python.py", "exec"), ns)

FILES, REQUESTED = {}, []

class Resp:
    def __init__(self, code, text):
        self.status_code, self.text = code, text

class requests:
    @staticmethod
    def get(url, headers=None):
        REQUESTED.append(url)
        return Resp(200, FILES[url]) if url in FILES else Resp(404, "")

ns["requests"] = requests
default_repl = ns["REPLACE_REQ_PACKAGES"]
cases = json.load(open(sys.argv[2]))
for c in cases:
    FILES.clear(); FILES.update(c.get("files", {})); REQUESTED.clear()
    ns["REPLACE_REQ_PACKAGES"] = [tuple(x) for x in c["repl"]] if "repl" in c else default_repl
    fn = c["fn"]
    if fn == "clean_requirements":
        c["want"] = ns["clean_requirements"](c["in"])
    elif fn == "clean_environment_yml":
        c["want"] = ns["clean_environment_yml"](c["in"])
    elif fn == "get_requirements":
        c["want"] = ns["clean_requirements"](ns["get_requirements_by_commit"](c["repo"], c["commit"]))
        c["requested"] = list(REQUESTED)
    elif fn == "get_environment_yml":
        c["want"] = ns["clean_environment_yml"](ns["get_environment_yml_by_commit"](c["repo"], c["commit"], "testbed"))
        c["requested"] = list(REQUESTED)
json.dump(cases, sys.stdout, ensure_ascii=False, indent=1)
print()
