"""Runs upstream SWE-bench v4.1.0's own log parser functions on requests.

usage: python3 oracle.py V410_DIR < requests.jsonl > responses.jsonl

V410_DIR is an unmodified extract of the tag (git archive v4.1.0 | tar -x).
Each request line is {"parser": NAME, "instance_id": ID, "log": TEXT}; each
response line is {"ok": true, "map": [[test, status], ...]} (dict order) or
{"ok": false, "err": "ExceptionType: message"}.

Only swebench/harness/log_parsers/*.py is imported from V410_DIR, unmodified.
What they import from the rest of the harness is replaced by stand-ins made
here: constants.TestStatus (the enum's values), test_spec.TestSpec (only
instance_id is read, by the two dispatchers), and utils.ansi_escape (its
source is copied from V410_DIR's utils.py, which imports packages Debian does
not have).
"""
import json
import os
import re
import shutil
import sys
import tempfile

src = os.path.join(sys.argv[1], "swebench", "harness")
root = tempfile.mkdtemp()
pkg = os.path.join(root, "swebench", "harness")
os.makedirs(os.path.join(pkg, "test_spec"))
for d in ("swebench", "swebench/harness", "swebench/harness/test_spec"):
    open(os.path.join(root, d, "__init__.py"), "w").close()
with open(os.path.join(pkg, "constants.py"), "w") as f:
    f.write("from enum import Enum\nclass TestStatus(Enum):\n"
            "    FAILED = 'FAILED'\n    PASSED = 'PASSED'\n    SKIPPED = 'SKIPPED'\n"
            "    ERROR = 'ERROR'\n    XFAIL = 'XFAIL'\n")
with open(os.path.join(pkg, "test_spec", "test_spec.py"), "w") as f:
    f.write("class TestSpec:\n    def __init__(self, instance_id):\n        self.instance_id = instance_id\n")
utils = open(os.path.join(src, "utils.py")).read()
m = re.search(r"^def ansi_escape\(.*?(?=^\S)", utils, re.S | re.M)
with open(os.path.join(pkg, "utils.py"), "w") as f:
    f.write("import re\n" + m.group(0))
shutil.copytree(os.path.join(src, "log_parsers"), os.path.join(pkg, "log_parsers"))
sys.path.insert(0, root)

from swebench.harness.log_parsers import c, go, java, javascript, php, python, ruby, rust  # noqa: E402
from swebench.harness.test_spec.test_spec import TestSpec  # noqa: E402

modules = [c, go, java, javascript, php, python, ruby, rust]


def parser(name):
    for mod in modules:
        if hasattr(mod, name):
            return getattr(mod, name)
    raise KeyError(name)


for line in sys.stdin:
    req = json.loads(line)
    try:
        sm = parser(req["parser"])(req["log"], TestSpec(req.get("instance_id", "")))
        out = {"ok": True, "map": [[k, v] for k, v in sm.items()]}
    except Exception as e:  # upstream raising is a result too
        out = {"ok": False, "err": type(e).__name__ + ": " + str(e)[:200]}
    print(json.dumps(out), flush=True)
