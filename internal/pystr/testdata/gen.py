#!/usr/bin/env python3
"""Writes python.json, the expectations of package pystr's tests, from the
Python that runs it (3.11 for the committed file):

    python3 gen.py > python.json

space: every code point c with chr(c).isspace(); re_s: every code point
re's \\s matches in a str pattern; cases: strings with their strip(),
lstrip(), rstrip() and len(s) - len(s.lstrip()).
"""
import json, re, sys

inputs = [
    "", " ", "abc", "  abc  ", "\t\n\v\f\r x \r\n",
    "\x1c\x1d\x1e\x1fx\x1f", "\u0085a\u00a0", "\u1680\u2000\u200a mid \u2028\u2029",
    "\u202f\u205f\u3000end\u3000", "\u200bnot space\u200b", "\ufeffbom\ufeff",
    "  -r base.txt", "\u3000\u3000- pip:", "é  ", "a\u00a0b",
]
out = {
    "python": sys.version.split()[0],
    "space": [c for c in range(0x110000) if chr(c).isspace()],
    "re_s": [c for c in range(0x110000) if re.fullmatch(r"\s", chr(c))],
    "cases": [{"s": s, "strip": s.strip(), "lstrip": s.lstrip(), "rstrip": s.rstrip(),
               "indent": len(s) - len(s.lstrip())} for s in inputs],
}
json.dump(out, sys.stdout, indent=1)
sys.stdout.write("\n")
