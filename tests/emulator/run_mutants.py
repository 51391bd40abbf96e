#!/usr/bin/env python3
"""The mutation test of the SIMT emulator (CTest emulated.mutants).

Each mutant of mutants.toml is a copy of a real kernel source with one injected bug. For a
kernel of the cuda plugin, the plugin is rebuilt for the emulator from a copy of its sources
with the mutation (arbiter-emucc, the build's own flags; the objects the mutation cannot
reach are reused) and the kernel is verified with `arbiter verify --device=cuda-emulated`.
For a generated kernel, the altered source gets a manifest of its own (renamed, its SHA-256
updated) and goes through `arbiter try --device=cuda-emulated`. A mutant is caught when the
gate fails it and its report matches the mutant's `caught` pattern. Every problem must also
pass with the unmutated kernel (the control), so that no catch is the emulator's own noise.

usage: run_mutants.py mutation_build.json mutants.toml [--only NAME...] [--report FILE] [--keep DIR] [--jobs N]
Exit status 0 when every mutant is caught and every control passes.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

ENV = dict(os.environ, ARBITER_LOG_LEVEL="error")


def config_text(plugins):
    # The kernel sandbox off: what is tested here is what the emulator catches, and the
    # sandbox would verify every control twice (tests/gpu/test_gpu_cheaters.cpp tests it).
    paths = ", ".join(json.dumps(p) for p in plugins)
    return ('log_level = "error"\n[plugins]\nsearch_default_paths = false\n'
            f'paths = [{paths}]\n[cuda]\ndevice = "emulated"\n[verify]\nsandbox = "off"\n')


def run(command, timeout=1500):
    started = time.monotonic()
    try:
        p = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=timeout)
        return p.returncode, p.stdout + p.stderr, time.monotonic() - started
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return -1, out + f"\n(timed out after {timeout} s)", time.monotonic() - started


def mutate(text, mutant):
    count = text.count(mutant["find"])
    if count != 1:
        raise RuntimeError(f"{mutant['file']}: the text to mutate occurs {count} times (must be once): "
                           "update mutants.toml with the kernel")
    return text.replace(mutant["find"], mutant["replace"])


class Build:
    def __init__(self, info):
        self.info = info
        self.source_dir = info["source_dir"]
        self.plugin_dir = os.path.join(self.source_dir, "plugins", "cuda")

    def cuda_plugin(self, mutant, work):
        """The cuda plugin rebuilt with the mutation; returns the path of the .so."""
        copy = os.path.join(work, "plugins", "cuda")
        shutil.copytree(self.plugin_dir, copy)
        target = os.path.join(self.source_dir, mutant["file"])
        relative = os.path.relpath(target, self.plugin_dir)
        if relative.startswith(".."):
            raise RuntimeError(f"{mutant['file']} is not a source of the cuda plugin")
        mutated = os.path.join(copy, relative)
        with open(target) as f:
            text = mutate(f.read(), mutant)
        with open(mutated, "w") as f:
            f.write(text)
        # A mutated .cu rebuilds itself; a mutated header, every source (all may include it).
        rebuild = [s for s in self.info["cuda_sources"] if not target.endswith((".cu", ".cpp")) or s == target]
        flags = [f.replace(self.plugin_dir, copy) if f.startswith("-I") else f for f in self.info["cuda_flags"]]
        objects = list(self.info["cuda_objects"])
        jobs = []
        for source in rebuild:
            index = self.info["cuda_sources"].index(source)
            copied = os.path.join(copy, os.path.relpath(source, self.plugin_dir))
            objects[index] = os.path.join(work, os.path.basename(source) + ".o")
            jobs.append([self.info["emucc"], f"--compiler={self.info['compiler']}", "-c", copied, "-o", objects[index]] + flags)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            for rc, out, _ in pool.map(run, jobs):
                if rc != 0:
                    raise RuntimeError("the mutant does not compile:\n" + out)
        library = os.path.join(work, "arbiter_cuda.so")
        emu = self.info["emulator_library"]
        link = [self.info["compiler"], "-shared", "-fPIC", "-o", library] + objects + [
            emu, f"-Wl,-rpath,{os.path.dirname(emu)}", "-Wl,--no-undefined"] + self.info["link_flags"]
        rc, out, _ = run(link)
        if rc != 0:
            raise RuntimeError("the mutant does not link:\n" + out)
        return library

    def verify(self, plugin, kernel, problem, work, tag):
        config = os.path.join(work, f"{tag}.toml")
        with open(config, "w") as f:
            f.write(config_text([plugin]))
        return run([self.info["arbiter"], "--config", config, "verify", problem, "--device=cuda-emulated",
                    f"--kernel={kernel}", "--full"])

    def generated_manifest(self, mutant, work, mutated):
        """A manifest of the (mutated or original) generated kernel under its own name, tried
        on the mutant's problem only."""
        manifest = os.path.join(self.source_dir, mutant["manifest"])
        with open(manifest) as f:
            text = f.read()
        source_path = os.path.join(self.source_dir, mutant["file"])
        with open(source_path) as f:
            source = f.read()
        if mutated:
            source = mutate(source, mutant)
        tag = "mutant" if mutated else "control"
        name = re.search(r'^name = "([^"]+)"', text, re.M).group(1)
        text = re.sub(r'^name = "[^"]+"', f'name = "{tag}_{name}"', text, count=1, flags=re.M)
        text = re.sub(r'^source = "[^"]+"', f'source = "{tag}_{os.path.basename(source_path)}"', text, count=1, flags=re.M)
        text = re.sub(r'^source_sha256 = "[0-9a-f]+"',
                      f'source_sha256 = "{hashlib.sha256(source.encode()).hexdigest()}"', text, count=1, flags=re.M)
        text = text.split("\n[[shape]]")[0].rstrip() + f'\n\n[[shape]]\nproblem = "{mutant["problem"]} device=cuda"\n'
        with open(os.path.join(work, f"{tag}_{os.path.basename(source_path)}"), "w") as f:
            f.write(source)
        path = os.path.join(work, f"{tag}_{os.path.basename(manifest)}")
        with open(path, "w") as f:
            f.write(text)
        return path

    def try_manifest(self, manifest, work, tag):
        config = os.path.join(work, f"{tag}.toml")
        with open(config, "w") as f:
            f.write(config_text([self.info["generated_plugin"]]))
        return run([self.info["arbiter"], "--config", config, "try", manifest, "--device=cuda-emulated"])


def control_key(mutant):
    return (mutant.get("manifest") or mutant["kernel"], mutant["problem"])


def check_control(build, mutant, keep):
    """The unmutated kernel on the mutant's problem: (passed, output)."""
    work = tempfile.mkdtemp(prefix=f"control-{mutant['name']}-", dir=keep)
    try:
        if "manifest" in mutant:
            rc, out, _ = build.try_manifest(build.generated_manifest(mutant, work, False), work, "control")
            return rc == 0 and '"verified": true' in out, out
        rc, out, _ = build.verify(build.info["cuda_plugin"], mutant["kernel"], mutant["problem"], work, "control")
        return rc == 0 and " 0 failed" in out, out
    except Exception as e:
        return False, f"error: {e}"
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def check_mutant(build, mutant, keep):
    """(caught, how, seconds, output)"""
    work = tempfile.mkdtemp(prefix=f"mutant-{mutant['name']}-", dir=keep)
    started = time.monotonic()
    try:
        if "manifest" in mutant:
            rc, out, _ = build.try_manifest(build.generated_manifest(mutant, work, True), work, "mutant")
            failed = rc == 5 and '"verified": false' in out
        else:
            plugin = build.cuda_plugin(mutant, work)
            rc, out, _ = build.verify(plugin, mutant["kernel"], mutant["problem"], work, "mutant")
            failed = rc == 4 and " 1 failed" in out
        match = re.search(mutant["caught"], out, re.S)
        caught = failed and match is not None
        summaries = re.findall(r"\bfailed: ([a-z_]+(?:, [a-z_]+)*)\s*(?:\\n|\"|$)", out, re.M)
        checks = sorted(set(c.strip() for found in summaries for c in found.split(",")))
        how = ", ".join(c for c in checks if c) or "passed"
        # What the emulator said, for a launch it stopped (a deadlock, a divergent barrier...).
        said = re.search(r"launch_failed: (?:status \d+: )?(.{0,400})", out)
        if said:
            how += ": " + said.group(1).replace(work + "/", "").strip()
        return caught, how, time.monotonic() - started, out
    except Exception as e:  # a mutant that no longer applies or does not build is a failure
        return False, f"error: {e}", time.monotonic() - started, str(e)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build")
    parser.add_argument("mutants")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--report")
    parser.add_argument("--keep", help="keep each mutant's folder under this one")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants checked at once")
    args = parser.parse_args()
    with open(args.build) as f:
        build = Build(json.load(f))
    with open(args.mutants, "rb") as f:
        mutants = tomllib.load(f)["mutant"]
    if args.only:
        mutants = [m for m in mutants if m["name"] in args.only]
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)

    # The controls first, one per kernel and problem, then the mutants; each a process of its
    # own (arbiter), so a pool of threads runs --jobs of them at once.
    rows, all_good = [], True
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        controls = {}
        for mutant in mutants:
            if control_key(mutant) not in controls:
                controls[control_key(mutant)] = pool.submit(check_control, build, mutant, args.keep)
        results = [pool.submit(check_mutant, build, mutant, args.keep) for mutant in mutants]
        for mutant, result in zip(mutants, results):
            caught, how, seconds, out = result.result()
            control, out_control = controls[control_key(mutant)].result()
            good = caught and control
            all_good &= good
            status = "caught" if caught else "NOT CAUGHT"
            print(f"{mutant['name']:<40} {status:<11} control {'passed' if control else 'FAILED'}  {seconds:6.1f} s  {how}",
                  flush=True)
            if not good:
                print("\n--- mutant ---\n" + out + "\n--- control ---\n" + out_control, flush=True)
            target = mutant.get("kernel") or "generated (" + os.path.basename(mutant["manifest"]) + ")"
            rows.append(f"| {mutant['name']} | {mutant['bug']} | {target}, `{mutant['problem']}` | "
                        f"{status} ({how}) | {'passed' if control else 'FAILED'} | {seconds:.0f} s |")
    if args.report:
        with open(args.report, "w") as f:
            f.write("| mutant | bug | kernel, problem | verdict (failed checks) | unmutated | mutant's time |\n")
            f.write("|---|---|---|---|---|---|\n")
            f.write("\n".join(rows) + "\n")
    caught = sum(1 for r in rows if "| caught" in r)
    passed = sum(1 for control, _ in (f.result() for f in controls.values()) if control)
    print(f"\n{caught} of {len(rows)} mutants caught; {passed} of {len(controls)} unmutated controls passed", flush=True)
    return 0 if all_good and mutants else 1


if __name__ == "__main__":
    sys.exit(main())
