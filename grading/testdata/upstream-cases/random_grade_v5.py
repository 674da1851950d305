# Random logs for grade_oracle_v5.py (python3 random_grade_v5.py N SEED):
# marker layouts, exit-code lines (forged first ones too), bad codes, SUITE_RAN
# evidence with zero and non-zero counts, infra signatures, truncated and
# spaced labels, every status, fail_only and pass_and_fail.
import json, random, sys
n, seed = int(sys.argv[1]), int(sys.argv[2])
random.seed(seed)
S, E = ">>>>> Start Test Output", ">>>>> End Test Output"
names = ["t.py::a", "t.py::b[x-1]", "t.py::b[x-2]", "t.py::c d", "[1]", "A", "t.py::e[p q]"]
labels = ["t.py::a", "t.py::b[x", "t.py::b[x-1]", "t.py::c d", "t.py::c", "A", "t.py::e[p", "missing"]
status = ["PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"]
noise = ["Executed 0 of 3", "Executed 2 of 3", "5 passing", "Tests:  0", "Tests:  4 total", "# tests 3", "3 specs, 0 failures",
         "case x': ok", "collected 0 items", "Killed", "Cannot allocate memory", "ModuleNotFoundError: x", "Could not resolve host: h",
         "Failed to launch", "Timeout error: 10 seconds exceeded.", "no tests ran", "random text", "", "Error response from daemon"]
parsers = [("parse_log_pytest", "pass_and_fail"), ("parse_log_sphinx", "pass_and_fail"), ("parse_log_django", "pass_and_fail"),
           ("parse_log_marked", "fail_only"), ("parse_log_gotest", "pass_and_fail"), ("parse_log_jest", "pass_and_fail")]
def body(p):
    out = []
    for _ in range(random.randint(0, 5)):
        r = random.random()
        nm, st = random.choice(names), random.choice(status)
        if r < 0.5:
            if p in ("parse_log_pytest", "parse_log_sphinx"):
                out.append(f"{st} {nm}")
            elif p == "parse_log_django":
                out.append(f"{nm} ... " + random.choice(["ok", "FAIL", "ERROR", "skipped 'x'"]))
            elif p == "parse_log_marked":
                out.append(f"{random.randint(1,3)}) {nm}")
            elif p == "parse_log_gotest":
                out.append(f"--- {random.choice(['PASS','FAIL','SKIP'])}: {nm} (0.00s)")
            else:
                out.append(f"  {random.choice(['✓','✕','○'])} {nm}")
        else:
            out.append(random.choice(noise))
    return out
for i in range(n):
    p, et = random.choice(parsers)
    lines = body(p)
    if random.random() < 0.3:
        lines.insert(0, ">>>>> Test Exit Code: " + random.choice(["0", "1", "-1", "\u0661"]))
    pre, post = body(p) if random.random() < 0.3 else [], body(p) if random.random() < 0.3 else []
    layout = random.random()
    if layout < 0.8:
        log = pre + [S] + lines + [E] + post
    elif layout < 0.9:
        log = pre + lines + post
    else:
        log = pre + [S] + lines + post
    if random.random() < 0.6:
        log.append(">>>>> Test Exit Code: " + random.choice(["0", "1", "2", "137"]))
    if random.random() < 0.05:
        log.insert(random.randint(0, len(log)), random.choice([">>>>> Patch Apply Failed", ">>>>> Tests Timed Out"]))
    f2p = random.sample(labels, random.randint(0, 3))
    p2p = random.sample(labels, random.randint(0, 3))
    print(json.dumps({"instance_id": f"o__r-{i}", "log_parser": p, "eval_type": et, "version": "", "FAIL_TO_PASS": f2p,
                      "PASS_TO_PASS": p2p, "patch_is_None": random.random() < 0.03, "log": "\n".join(log) + "\n"}))
