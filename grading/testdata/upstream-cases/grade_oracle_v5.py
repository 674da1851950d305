"""Runs upstream SWE-bench v5.0.2's own get_logs_eval and get_eval_report.

usage: python3 grade_oracle_v5.py V5_DIR < requests.jsonl > responses.jsonl

V5_DIR as for oracle_v5.py. Imported unmodified from it:
swebench/harness/grading.py, infra_failure.py, constants/__init__.py and
log_parsers/*.py; swebench.types.TestSpec is a stand-in with the fields
grading reads, swebench.utils.ansi_escape is copied. Each request line is
{"instance_id", "log_parser", "eval_type", "version", "FAIL_TO_PASS",
"PASS_TO_PASS", "patch_is_None", "log"}; the log is written to a file and
graded as run_instance does: the response is {"ok": true, "report":
json.dumps(report, indent=4) (report.json's bytes), "found": bool} or
{"ok": false, "err": ...}.
"""
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile

src = os.path.join(sys.argv[1], "swebench")
root = tempfile.mkdtemp()
pkg = os.path.join(root, "swebench")
os.makedirs(os.path.join(pkg, "harness"))
open(os.path.join(pkg, "__init__.py"), "w").close()
open(os.path.join(pkg, "harness", "__init__.py"), "w").close()
shutil.copytree(os.path.join(src, "harness", "constants"), os.path.join(pkg, "harness", "constants"))
shutil.copytree(os.path.join(src, "harness", "log_parsers"), os.path.join(pkg, "harness", "log_parsers"))
for f in ("grading.py", "infra_failure.py"):
    shutil.copy(os.path.join(src, "harness", f), os.path.join(pkg, "harness", f))
with open(os.path.join(pkg, "types.py"), "w") as f:
    f.write("class TestSpec:\n    def __init__(self, **kw):\n        self.__dict__.update(kw)\n")
utils = open(os.path.join(src, "utils.py")).read()
m = re.search(r"^def ansi_escape\(.*?(?=^\S|\Z)", utils, re.S | re.M)
with open(os.path.join(pkg, "utils.py"), "w") as f:
    f.write("import re\n" + m.group(0))
sys.path.insert(0, root)

from swebench.harness.grading import get_eval_report, get_logs_eval  # noqa: E402
from swebench.types import TestSpec  # noqa: E402

tmp = tempfile.mkdtemp()
for line in sys.stdin:
    req = json.loads(line)
    ts = TestSpec(instance_id=req["instance_id"], log_parser=req["log_parser"], eval_type=req["eval_type"],
                  version=req.get("version", ""), FAIL_TO_PASS=req["FAIL_TO_PASS"], PASS_TO_PASS=req["PASS_TO_PASS"])
    path = os.path.join(tmp, "test_output.txt")
    with open(path, "w") as f:
        f.write(req["log"])
    pred = {"instance_id": req["instance_id"], "model_name_or_path": "m",
            "model_patch": None if req["patch_is_None"] else "diff"}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            _, found = get_logs_eval(ts, path)
            report = get_eval_report(ts, pred, path, include_tests_status=True)
        out = {"ok": True, "found": found, "report": json.dumps(report, indent=4)}
    except Exception as e:
        out = {"ok": False, "err": type(e).__name__ + ": " + str(e)[:200]}
    print(json.dumps(out), flush=True)
