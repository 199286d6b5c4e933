#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Flattens kunit.py's JSON (kunit.py parse --json=FILE) to one line per test
case: "PASS suite.case" (or FAIL/SKIP/ERROR). Exits 1 if there are none."""
import json
import sys


def walk(group, prefix):
    name = group.get("name", "")
    path = prefix + [name] if name and name != "KUnit Test Group" else prefix
    for case in group.get("test_cases", []):
        yield case["status"], ".".join(path + [case["name"]])
    for sub in group.get("sub_groups", []):
        yield from walk(sub, path)


with open(sys.argv[1]) as f:
    cases = list(walk(json.load(f), []))
for status, name in cases:
    print(status, name)
sys.exit(0 if cases else 1)
