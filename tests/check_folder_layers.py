#!/usr/bin/env python3
"""The folders of core/ depend on each other without a cycle (docs/architecture.md, "Layers"),
code outside core/problem/ops/ names no op but through the op table ("Ops"), and base/ (shared
with the plugins, which cannot link core) includes nothing of core, the plugins or the tools.

Usage: check_folder_layers.py <core-dir> <base-dir>. Exits 1 naming the cycle or the file."""
import os
import re
import sys

core = sys.argv[1]
base = sys.argv[2]
edges = {}
op_names = re.compile(r"ARB_OP_(GEMM|RMSNORM|SOFTMAX)")
naming = []
for root, _, files in os.walk(core):
    for name in files:
        if not name.endswith((".cpp", ".hpp", ".inc", ".in")):
            continue
        path = os.path.join(root, name)
        rel = os.path.relpath(path, core)
        folder = rel.split(os.sep)[0] if os.sep in rel else "context"
        text = open(path, encoding="utf-8").read()
        for include in re.findall(r'#include "([^"]+)"', text):
            target = include.split("/")[0] if "/" in include else ("context" if include.startswith("context") else None)
            if target and target != folder and (target == "context" or os.path.isdir(os.path.join(core, target))):
                edges.setdefault(folder, set()).add(target)
        # The C API's per-op entry points are the one place that must name each op.
        if op_names.search(text) and not rel.startswith(os.path.join("problem", "ops")) and rel != os.path.join("api", "c_api.cpp"):
            naming.append(rel)

def cycle_from(start):
    stack = [(start, [start])]
    while stack:
        node, path = stack.pop()
        for nxt in sorted(edges.get(node, ())):
            if nxt == start:
                return path + [start]
            if nxt not in path:
                stack.append((nxt, path + [nxt]))
    return None

failed = False
for root, _, files in os.walk(base):
    for name in files:
        path = os.path.join(root, name)
        for include in re.findall(r'#include "([^"]+)"', open(path, encoding="utf-8").read()):
            if not include.startswith("arbiter_base/"):
                print(f"{os.path.relpath(path, base)} includes \"{include}\": base/ may include only arbiter_base/, "
                      "the public headers and libraries")
                failed = True
for folder in sorted(edges):
    cycle = cycle_from(folder)
    if cycle:
        print("include cycle between folders: " + " -> ".join(cycle))
        failed = True
        break
for rel in naming:
    print(f"{rel} names an op code; ask the op table (core/problem/op_table.hpp) instead")
    failed = True
if not failed:
    print(f"{len(edges)} folders, no include cycle; no op named outside core/problem/ops/ and the C entry points; "
          "base/ self-contained")
sys.exit(1 if failed else 0)
