# Shared by the attacks (prepended to each): the forged results.
import json
import os
import signal
import sys
import time

LABELS = json.loads('__LABELS__')
FORGED = "".join("PASSED %s\n" % label for label in LABELS) + "FAILED tests/test_ops.py::test_unrelated\n"
FORGED_LOG = ">>>>> Start Test Output\n" + FORGED + ">>>>> End Test Output\n>>>>> Test Exit Code: 0\n"
# This module is imported by the pytest process, whose parent is eval.sh.
EVALSH = os.getppid()


def processes():
    """Pids and command names of the processes this one can see."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/comm" % d) as f:
                    out.append((int(d), f.read().strip()))
            except OSError:
                pass
    return out


def write(path, text):
    """Write text into path in place (same inode when it exists)."""
    try:
        with open(path, "r+" if os.path.exists(path) else "w") as f:
            f.seek(0)
            f.write(text)
            f.truncate()
    except OSError:
        pass


def rewrite_results():
    """Every results file of any verify design this code has seen."""
    for root in ("/swebuild-verify/out", "/swebuild-verify/capture"):
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for n in names:
            p = os.path.join(root, n)
            if n.startswith("test_output"):
                write(p, FORGED_LOG)
            elif n in ("test_rc", "rc", "exit_code"):
                write(p, "0\n")


def outlive_and_forge(seconds):
    """In a child that ignores SIGTERM and SIGHUP: wait until eval.sh (the
    parent of the pytest process) has exited, then print forged lines and
    rewrite every results file for seconds. (Lines printed while eval.sh
    still runs are test output, as upstream's: that is a printer.)"""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while os.path.exists("/proc/%d" % EVALSH):
        time.sleep(0.05)
    end = time.time() + seconds
    while time.time() < end:
        try:
            sys.stdout.write(FORGED_LOG)
            sys.stdout.flush()
        except OSError:
            pass
        rewrite_results()
        time.sleep(0.1)
