#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""rdma-core's own test suite (pyverbs' tests/, as python3-pyverbs ships it)
on one device, every outcome recorded; and the verdict of two such runs.

  rdma_core_suite.py run TESTDIR OUT.json --dev DEV --gid N MODULE...
      runs the named test modules of TESTDIR (an unpacked copy of
      /usr/share/doc/rdma-core/tests) on DEV with the loader run_tests.py
      uses, and writes {test id: [outcome, detail]} to OUT.json, an outcome
      being pass, fail, error, skip (detail: the reason), xfail or xpass.
      A test with two outcomes (a failure, then an error in its tear-down)
      keeps the worse.
  rdma_core_suite.py verdict OURS.json PEER.json EXPECTED MODE
      OURS is virtio_rdma0's run, PEER rxe0's in the same guest ("-": no
      peer run, the count against it is left out). Fails
      (exit 1, each reason on a line) when any of our tests failed or
      errored other than as EXPECTED allows, when one EXPECTED to pass in
      MODE did not, when one skipped that EXPECTED does not list as a skip
      of MODE, or when we passed fewer than the peer of the tests EXPECTED
      does not list as skips of MODE (both counts are printed whole too).

EXPECTED: one test id (or a shell pattern of ids) a line with what it does
in each mode and why: "ID OUTCOME[@MODE] ... # why" (see the file).
"""
import fnmatch
import json
import os
import sys
import unittest
from collections import Counter
from importlib.machinery import SourceFileLoader

RANK = {"pass": 0, "xfail": 0, "skip": 1, "xpass": 2, "fail": 3, "error": 4}


def run(testdir, out, argv):
    sys.path.insert(0, testdir)
    sys.argv = [sys.argv[0]] + argv
    from args_parser import parser  # noqa: E402 (the suite's own options)

    tests = SourceFileLoader("tests", os.path.join(testdir, "__init__.py")).load_module()
    parser.parse_args()
    outcomes = {}

    def record(test, outcome, detail=""):
        old = outcomes.get(test.id())
        if old is None or RANK[outcome] > RANK[old[0]]:
            outcomes[test.id()] = [outcome, detail[-800:]]

    class Result(unittest.TextTestResult):
        def addSuccess(self, test):
            super().addSuccess(test)
            record(test, "pass")

        def addFailure(self, test, err):
            super().addFailure(test, err)
            record(test, "fail", self._exc_info_to_string(err, test))

        def addError(self, test, err):
            super().addError(test, err)
            record(test, "error", self._exc_info_to_string(err, test))

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            record(test, "skip", reason)

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            record(test, "xfail")

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            record(test, "xpass")

    prog = unittest.main(
        module=tests,
        exit=False,
        testRunner=unittest.TextTestRunner(resultclass=Result, verbosity=2),
    )
    with open(out, "w") as f:
        json.dump(outcomes, f, indent=1, sort_keys=True)
    counts = dict(Counter(o for o, _ in outcomes.values()))
    print(f"{len(outcomes)} tests: {counts}", file=sys.stderr)
    return 0 if prog.result.testsRun else 1


def expectations(path, mode):
    """(pattern, outcome, why) for MODE, in the file's order."""
    rules = []
    block, in_group = [], False
    with open(path) as f:
        for line in f:
            text, _, why = line.partition("#")
            words = text.split()
            if not words:
                # A comment block above a group of lines is their reason.
                if why.strip():
                    block = ([] if in_group else block) + [why.strip()]
                else:
                    block = []
                in_group = False
                continue
            in_group = True
            reason = why.strip() or " ".join(block)
            for spec in words[1:]:
                outcome, _, only = spec.partition("@")
                if not only or only == mode:
                    rules.append((words[0], outcome, reason))
    return rules


def names(test, pattern):
    """Whether PATTERN names TEST: its whole id or a dotted tail of it
    (test_x, Class.test_x, module.Class.test_x)."""
    return fnmatch.fnmatchcase(test, pattern) or fnmatch.fnmatchcase(test, "*." + pattern)


def expected(rules, test):
    for pattern, outcome, why in rules:
        if names(test, pattern):
            return outcome, why
    return None, ""


def verdict(ours_path, peer_path, expected_path, mode):
    with open(ours_path) as f:
        ours = json.load(f)
    # Without a peer run (make check: EXPECTED pins every outcome of
    # ours already), the comparison with rxe is left out.
    peer = None
    if peer_path != "-":
        with open(peer_path) as f:
            peer = json.load(f)
    rules = expectations(expected_path, mode)
    bad = []
    skips = []
    for test, (outcome, detail) in sorted(ours.items()):
        want, why = expected(rules, test)
        short = detail.strip().splitlines()[-1] if detail.strip() else ""
        if outcome in ("fail", "error", "xpass"):
            if want != outcome:
                bad.append(f"{test}: {outcome}: {short}")
        elif outcome == "skip":
            if want != "skip":
                bad.append(f"{test}: skipped ({detail}) where the list expects {want or 'a pass'}")
            else:
                skips.append(f"{test}: {detail} -- {why}")
        elif want == "skip":
            # A listed skip that passes is good news: the list is out of date.
            print(f"note: {test} passes though listed as a skip ({why})")
    for pattern, outcome, why in rules:
        if outcome == "pass":
            hits = [t for t in ours if names(t, pattern)]
            if not hits:
                bad.append(f"{pattern}: expected to pass, did not run")
    passed = sum(1 for o, _ in ours.values() if o == "pass")
    counts = dict(Counter(o for o, _ in ours.values()))
    if peer is None:
        print(f"virtio_rdma0 ({mode}): {passed} passed {counts}; rxe0 not run")
    else:
        peer_passed = sum(1 for o, _ in peer.values() if o == "pass")
        # The count is compared on what the device offers in this mode: a test
        # the list names as a skip of this mode (a feature absent on purpose,
        # each with its reason) is left out of both sides.
        offered = [t for t in peer if expected(rules, t)[0] != "skip"]
        ours_on = sum(1 for t in offered if ours.get(t, ["none"])[0] == "pass")
        peer_on = sum(1 for t in offered if peer[t][0] == "pass")
        peer_counts = dict(Counter(o for o, _ in peer.values()))
        print(f"virtio_rdma0 ({mode}): {passed} passed {counts}; rxe0: {peer_passed} passed {peer_counts}")
        print(f"of the {len(offered)} tests not listed as skips of this mode: "
              f"virtio_rdma0 passed {ours_on}, rxe0 {peer_on}")
        if ours_on < peer_on:
            bad.append(f"virtio_rdma0 passed {ours_on} of the tests it offers, fewer than rxe0's {peer_on}")
        peer_only = sorted(t for t, (o, _) in peer.items() if o == "pass" and ours.get(t, ["none"])[0] != "pass")
        for t in peer_only:
            print(f"rxe0 passes, virtio_rdma0 does not: {t} ({ours.get(t, ['not run'])[0]})")
    for line in skips:
        print(f"skip: {line}")
    for line in bad:
        print(f"FAIL: {line}")
    return 1 if bad else 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        return run(sys.argv[2], sys.argv[3], sys.argv[4:])
    if len(sys.argv) == 6 and sys.argv[1] == "verdict":
        return verdict(*sys.argv[2:6])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
