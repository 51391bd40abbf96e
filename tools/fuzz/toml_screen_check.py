#!/usr/bin/env python3
"""Differential check of the TOML screen (base/arbiter_base/toml_screen.hpp) against toml++.

Random documents from TOML's tokens, valid and not, go through the screen and, where it lets
them pass, through toml++ 3.3.0 built header-only with its assertions checked and with
UndefinedBehaviorSanitizer (toml_screen_check.cpp). The check fails when toml++ fails an
assertion or reaches undefined behaviour on a document the screen passed, or when the screen
refuses a document Python's tomllib accepts (valid TOML).

usage: tools/fuzz/toml_screen_check.py [--seeds FIRST LAST] [--docs N]
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile

try:
    import tomllib  # Python 3.11
except ImportError:  # the check needs it: skipped, not passed (CTest's skip code)
    print("skipped: this Python has no tomllib (3.11 or later)")
    sys.exit(77)

TOKENS = ['[', '[[', ']', ']]', '"', "'", '"""', "'''", '\\', '#', '\n', 'a', 'b.c', ' = ', '=', '1', 'é', ' ',
          '\t', '{', '}', ',', '"x"', "'y'", 'a = ', '\n[t]\n', '\n[[u]]\n', 'x = [\n', '\xa0', '\ufefc',
          '1979-05-27', 'inf', '0x1', '+', '.', '\r\n', '\ufeff', '"é"', 'a.b = ', '{a = 1}', '[1, 2]', 'true',
          '1.5', '"""é"""', "'''é'''", '\\n', '\\u00e9', '1979-05-27 ', '07:32:00', '.5', 'Z', '-08:00', ' 1',
          '1979-05-27 07:32:00', '0x', '1e', '_', 'T', 't', ':', '07:', '1979-05-27T', '-', '+08:00', 'z']


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", nargs=2, type=int, default=[1, 5])
    parser.add_argument("--docs", type=int, default=200000)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if shutil.which("g++") is None:
        print("skipped: no g++ to build the checking toml++")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="toml-screen-")
    program = os.path.join(work, "check")
    subprocess.run(["g++", "-std=c++20", "-O1", "-g", "-fsanitize=undefined", "-fno-sanitize-recover=undefined",
                    "-I", os.path.join(root, "base"), os.path.join(root, "tools/fuzz/toml_screen_check.cpp"),
                    "-o", program], check=True)
    last = os.path.join(work, "last.toml")
    failed = False
    for seed in range(args.seeds[0], args.seeds[1]):
        rng = random.Random(seed)
        docs = ["".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 16))) for _ in range(args.docs)]
        p = subprocess.run([program], input="\0".join(docs).encode() + b"\0", capture_output=True,
                           env=dict(os.environ, TOML_SCREEN_LAST=last))
        results = p.stdout.decode(errors="replace").splitlines()
        valid = refused_valid = 0
        for doc, result in zip(docs, results):
            try:
                tomllib.loads(doc)
            except tomllib.TOMLDecodeError:
                continue
            valid += 1
            if result == "refused":
                refused_valid += 1
                print(f"seed {seed}: valid TOML refused: {doc!r}")
        assertions = [r for r in results if r.startswith("assertion")]
        print(f"seed {seed}: {len(docs)} documents, {results.count('refused')} refused by the screen, "
              f"{results.count('parsed')} parsed and {results.count('error')} refused by toml++, "
              f"{len(assertions)} failed assertions, {valid} valid by tomllib ({refused_valid} refused), "
              f"exit status {p.returncode}")
        if p.returncode != 0:
            print(p.stderr.decode(errors="replace")[-500:])
            print("last document:", repr(open(last, "rb").read()))
        failed |= p.returncode != 0 or bool(assertions) or refused_valid > 0
    if not failed:
        shutil.rmtree(work)  # kept on failure: the last document is there
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
