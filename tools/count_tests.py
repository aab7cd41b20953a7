#!/usr/bin/env python3
"""Counts real test results for tools/test.sh.

  count_tests.py collect TESTLOGS OUT TARGET...   read TARGET's test.xml under TESTLOGS;
                                                   a TARGET written "!//x:y" is one bazel
                                                   reported as failed: if its test.xml shows
                                                   no failure (a test that ran gtest binaries
                                                   may have had its XML overwritten), it
                                                   counts one failure more
  count_tests.py collect-xml OUT NAME=XML...       read gtest XML files named directly (the
                                                   VM's results); a missing file is a failure
  count_tests.py record OUT NAME pass|fail         add one check's outcome
  count_tests.py summarize DIR                     print "N passed, N failed", exit 1 on failure

Each gtest case in a test.xml counts once. A test target without a test.xml (it did not
build, or it crashed before writing one) counts as one failure, so nothing is lost.
Outcomes are appended to OUT as lines "pass|fail|skip<TAB>name".
"""
import os
import sys
import xml.etree.ElementTree as ET


def collect(testlogs, out, targets):
    pairs = []
    failed = set()
    for target in targets:
        if target.startswith("!"):
            failed.add(target[1:])
            continue
        rel = target.lstrip("/").replace(":", "/")
        pairs.append((target, os.path.join(testlogs, rel, "test.xml")))
    collect_files(out, pairs, failed)


def collect_files(out, pairs, failed=frozenset()):
    lines = []
    for target, path in pairs:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError):
            lines.append(f"fail\t{target} (no test.xml: did not build or run)")
            continue
        cases = list(root.iter("testcase"))
        if not cases:
            lines.append(f"fail\t{target} (test.xml lists no test case)")
            continue
        if target in failed and not any(
                c.find("failure") is not None or c.find("error") is not None
                for c in cases):
            lines.append(f"fail\t{target} (bazel reported it failed; its test.xml "
                         "shows no failure)")
        for case in cases:
            name = f"{target} {case.get('classname', '')}.{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                lines.append(f"fail\t{name}")
            elif (case.find("skipped") is not None
                  or case.get("result") in ("skipped", "suppressed")
                  or case.get("status") == "notrun"):
                # Skipped, or DISABLED_ (gtest writes status="notrun"): never a pass.
                lines.append(f"skip\t{name}")
            else:
                lines.append(f"pass\t{name}")
    with open(out, "a") as f:
        f.writelines(line + "\n" for line in lines)


def summarize(directory):
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name)) as f:
            for line in f:
                outcome, _, what = line.rstrip("\n").partition("\t")
                counts[outcome] += 1
                if outcome == "fail":
                    print(f"FAILED [{name}] {what}")
    line = f"{counts['pass']} passed, {counts['fail']} failed"
    if counts["skip"]:
        line += f", {counts['skip']} skipped"
    print(line)
    return 1 if counts["fail"] or counts["pass"] == 0 else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "collect":
        collect(argv[2], argv[3], argv[4:])
        return 0
    if len(argv) >= 3 and argv[1] == "collect-xml":
        collect_files(argv[2], [tuple(a.split("=", 1)) for a in argv[3:]])
        return 0
    if len(argv) == 5 and argv[1] == "record":
        with open(argv[2], "a") as f:
            f.write(f"{argv[4]}\t{argv[3]}\n")
        return 0
    if len(argv) == 3 and argv[1] == "summarize":
        return summarize(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
