#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Helpers around the kernel's kunit.py for make check.

  kunit-results.py split LOG DIR   writes each top-level KTAP document of a
                                   kernel log to DIR/doc-N.log (kunit.py
                                   parse reads only the first one: built-in
                                   suites at boot and each module's suites at
                                   load are separate documents)
  kunit-results.py cases JSON      one line per test case from kunit.py's
                                   JSON: "PASS suite.case" (or FAIL/SKIP/
                                   ERROR); exits 1 if there are none
"""
import json
import os
import re
import sys

TOP_KTAP = re.compile(r"^\[\s*[0-9.]+\] KTAP version")


def split(log, outdir):
    docs = []
    with open(log, errors="replace") as f:
        for line in f:
            if TOP_KTAP.match(line):
                docs.append([])
            if docs:
                docs[-1].append(line)
    os.makedirs(outdir, exist_ok=True)
    for i, doc in enumerate(docs):
        with open(os.path.join(outdir, f"doc-{i}.log"), "w") as f:
            f.writelines(doc)
    return 0 if docs else 1


def walk(group, prefix):
    name = group.get("name", "")
    path = prefix + [name] if name and name != "KUnit Test Group" else prefix
    for case in group.get("test_cases", []):
        yield case["status"], ".".join(path + [case["name"]])
    for sub in group.get("sub_groups", []):
        yield from walk(sub, path)


def cases(path):
    with open(path) as f:
        found = list(walk(json.load(f), []))
    for status, name in found:
        print(status, name)
    return 0 if found else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "split":
        sys.exit(split(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 3 and sys.argv[1] == "cases":
        sys.exit(cases(sys.argv[2]))
    sys.exit(__doc__)
