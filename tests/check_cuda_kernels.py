#!/usr/bin/env python3
"""Checks of the cuda plugin's sm_90a machine code that need no GPU.

  check_cuda_kernels.py resources DIR             ptxas's resource report of every kernel:
                                                  no spill stores or loads anywhere, and the
                                                  register counts that setmaxnreg relies on
  check_cuda_kernels.py sass DIR CUOBJDUMP        the SASS (cuobjdump --dump-sass): no
                                                  local-memory traffic (LDL/STL) anywhere,
                                                  and each file's required instructions

DIR holds <file>.cubin and <file>.resources.txt for each kernel file of plugins/cuda/kernels
(built by plugins/cuda/CMakeLists.txt). Exit 0 pass, 1 fail, 77 skipped (no cuobjdump).
"""
import os
import re
import subprocess
import sys

# Per kernel file: instructions every kernel function in it must contain (regexes over
# SASS opcodes). A file named here but missing fails the check: a rule cannot go stale.
REQUIRED = {
    "rmsnorm": [r"\bLDG\.E\.128", r"\bSTG\.E\.128"],    # 16-byte loads and stores
    "softmax": [r"\bLDG\.E\.128", r"\bSTG\.E\.128"],
    "softmax_cluster": [r"\bLDG\.E\.128", r"\bSTG\.E\.128"],
    "swiglu": [r"\bLDG\.E\.128", r"\bSTG\.E\.128"],
    "rope": [r"\bLDG\.E\.128", r"\bSTG\.E\.128"],       # its vector kernels (kVector true)
    "qkv": [r"\bLDG\.E\.128"],                         # W, x and the norm weight (kVector true)
    "attention": [r"\bLDG\.E\.128"],                   # each key's row in 16-byte loads
    "attention_sm80": [r"\bHMMA\.16816", r"\bLDGSTS", r"\bLDSM\.16\.MT88"],  # mma.sync, cp.async, ldmatrix.trans
    "gemm_splitk": [r"\bLDG\.E\.128"],                  # the weights in 16-byte loads
    "gemm_sm80": [r"\bHMMA\.16816", r"\bLDGSTS", r"\bLDSM"],  # mma.sync, cp.async, ldmatrix
    "gemm_sm90": [r"\bHGMMA\.64x(128|256)x16", r"\bUTMALDG"],   # wgmma and TMA loads
}
# Functions exempt from REQUIRED (helper kernels with nothing to vectorise), by substring.
EXEMPT = {
    "gemm_splitk": ["splitk_reduce_kernel"],
    "attention": ["attention_combine_kernel"],  # the chunks' partials: a float a thread
    "rope": [", false>("],  # rope_kernel<T, interleaved, false>: a pair at a time, for dims and strides vectors do not fit
    "qkv": [", false>("],  # qkv_kernel<T, interleaved, false>: element by element, for rows that are not whole vectors
}
FORBIDDEN = [r"\bLDL\b", r"\bSTL\b"]  # local memory: spills or stack arrays
# Kernels whose register count at launch is part of their design (setmaxnreg hands the
# block's registers around: 128 x 40 + 256 x 232 needs exactly 168 a thread at launch).
EXACT_REGISTERS = {r"gemm_sm90_kernel<[^>]*, 256>": 168}


def demangled(name):
    try:
        return subprocess.run(["c++filt", name], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return name


def check_resources(directory):
    reports = sorted(f for f in os.listdir(directory) if f.endswith(".resources.txt"))
    if not reports:
        print(f"no resource reports in {directory}")
        return 1
    failures, functions = 0, 0
    print(f"{'kernel':<90} {'regs':>5} {'smem':>7} {'stack':>6} {'spill st':>9} {'spill ld':>9}")
    for report in reports:
        text = open(os.path.join(directory, report)).read()
        # "Function properties for X" / "N bytes stack frame, S bytes spill stores, L bytes spill loads"
        # / "Used R registers, ..., M bytes smem"
        pattern = re.compile(
            r"Function properties for (\S+)\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores, "
            r"(\d+) bytes spill loads\n[^\n]*Used (\d+) registers(?:[^\n]*?(\d+) bytes smem)?")
        found = pattern.findall(text)
        if not found:
            print(f"{report}: no function properties found (did ptxas run with --resource-usage?)")
            failures += 1
        for name, stack, spill_st, spill_ld, regs, smem in found:
            functions += 1
            full = demangled(name)
            bad = int(spill_st) > 0 or int(spill_ld) > 0
            wrong_regs = [n for p, n in EXACT_REGISTERS.items() if re.search(p, full) and int(regs) != n]
            failures += bad or bool(wrong_regs)
            flags = ("  SPILLS" if bad else "") + (f"  NOT {wrong_regs[0]} REGISTERS" if wrong_regs else "")
            print(f"{full[:88]:<90} {regs:>5} {smem or '0':>7} {stack:>6} {spill_st:>9} {spill_ld:>9}{flags}")
    print(f"{functions} kernels, {failures} with spills, a wrong register count or unreadable reports")
    return 1 if failures else 0


def split_functions(sass):
    functions, current = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            current = m.group(1)
            functions[current] = []
        elif current is not None:
            m = re.search(r"\*/\s+(.*?);", line)
            if m:
                functions[current].append(m.group(1))
    return functions


def check_sass(directory, cuobjdump):
    if not cuobjdump or not os.path.exists(cuobjdump):
        print("SKIPPED: cuobjdump not found (tools/install-deps.sh puts PyPI's nvidia-cuda-cuobjdump in .tools/)")
        return 77
    env = dict(os.environ)
    env.setdefault("NVDISASM_PATH", os.path.dirname(cuobjdump))
    failures = 0
    for name in sorted(REQUIRED):
        if not os.path.exists(os.path.join(directory, name + ".cubin")):
            print(f"{name}.cubin: missing, but REQUIRED names it")
            failures += 1
    for cubin in sorted(f for f in os.listdir(directory) if f.endswith(".cubin")):
        stem = cubin[: -len(".cubin")]
        result = subprocess.run([cuobjdump, "--dump-sass", os.path.join(directory, cubin)], capture_output=True,
                                text=True, env=env)
        if result.returncode != 0:
            print(f"{cubin}: cuobjdump failed: {result.stderr.strip()}")
            failures += 1
            continue
        functions = split_functions(result.stdout)
        if not functions:
            print(f"{cubin}: no functions in the SASS")
            failures += 1
        for function, instructions in sorted(functions.items()):
            label = demangled(function)[:100]
            text = "\n".join(instructions)
            problems = [f"has {p.strip(chr(92) + 'b')}" for p in FORBIDDEN if re.search(p, text)]
            if not any(e in label for e in EXEMPT.get(stem, [])):
                problems += [f"lacks {p.replace(chr(92) + 'b', '').replace(chr(92), '')}"
                             for p in REQUIRED.get(stem, []) if not re.search(p, text)]
            failures += bool(problems)
            print(f"{'FAIL' if problems else 'ok  '} {stem}: {label} ({len(instructions)} instructions)"
                  + (": " + ", ".join(problems) if problems else ""))
    print(f"SASS check: {failures} failures")
    return 1 if failures else 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "resources":
        return check_resources(sys.argv[2])
    if len(sys.argv) >= 3 and sys.argv[1] == "sass":
        return check_sass(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
