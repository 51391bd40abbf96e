"""The runtime's other half: explain, plugins, verify and tune, as plain Python objects."""

import dataclasses
import json

import numpy as np
import pytest

import arbiter
import reference as ref


def test_versions():
    assert arbiter.abi_version() >> 16 == arbiter.ABI_VERSION_MAJOR
    assert arbiter.__version__ == arbiter.library_version() and arbiter.__version__.count(".") == 2


def test_explain_a_problem_and_a_call(ctx):
    text = ctx.explain("gemm f32 m=64 n=32 k=16")
    assert "gemm" in text and "m=64" in text
    a, b = np.ones((64, 16), np.float32), np.ones((16, 32), np.float32)
    from_tensors = ctx.explain("gemm", a, b)  # the same problem, described by tensors (align from the addresses)
    assert from_tensors.splitlines()[1] == text.splitlines()[1] and "kernel:" in text.splitlines()[1]
    # A transposed view is the problem with ta=1.
    assert "ta=1" in ctx.explain("gemm", np.ones((16, 64), np.float32).T, b)
    x = np.ones((4, 128), np.float16)
    assert "rmsnorm" in ctx.explain("rmsnorm", x, np.ones(128, np.float16), eps=1e-5)
    assert "softmax" in ctx.explain("softmax", x)
    fused = np.ones((4, 256), np.float32)
    assert ctx.explain("swiglu", x, x).splitlines()[1] == ctx.explain("swiglu f16 rows=4 cols=128").splitlines()[1]
    assert ctx.explain("swiglu", fused).splitlines()[1] == ctx.explain("swiglu f32 rows=4 cols=128 fused=1").splitlines()[1]
    heads = np.ones((4, 8, 64), np.float16)
    assert ctx.explain("rope", heads, np.zeros(4, np.int32), layout="interleaved").splitlines()[1] == ctx.explain(
        "rope f16 tokens=4 heads=8 dim=64 layout=interleaved").splitlines()[1]
    norm, down = np.ones(128, np.float16), np.ones((128, 48), np.float16)
    gate_up = ref.fused_gate_up(np.ones((48, 128), np.float16), np.ones((48, 128), np.float16))
    # The call on a fused gate/up weight is the problem in the syntax (fused weights have no field of their own).
    assert ctx.explain("mlp", x, norm, gate_up, down=down).splitlines()[1] == ctx.explain(
        "mlp f16 rows=4 hidden=128 inter=48").splitlines()[1]
    text = ctx.explain("mlp", x, norm, gate_up[:48], gate_up[48:], down, eps=1e-6)
    assert "mlp f16 rows=4 hidden=128 inter=48 ldx=128 ldy=128 ldgate=128 ldup=128 lddown=48" in text, text
    assert "chain.mlp" in text and "kernel:" in text
    # qkv: the fused weight's rows give head_dim; the call is the problem in the syntax.
    qkv_weight, positions = np.ones(((8 + 2 * 2) * 32, 128), np.float16), np.zeros(4, np.int32)
    assert ctx.explain("qkv", x, norm, qkv_weight, positions, 8, 2).splitlines()[1] == ctx.explain(
        "qkv f16 rows=4 hidden=128 heads=8 kvheads=2 dim=32").splitlines()[1]
    text = ctx.explain("qkv", x, norm, qkv_weight, positions, 8, 2, layout="interleaved", theta=10000.0, eps=1e-6)
    assert ("qkv f16 rows=4 hidden=128 heads=8 kvheads=2 dim=32 layout=interleaved theta=10000 maxpos=8192 ldx=128 "
            "ldw=128 ldy=384") in text, text
    assert "chain.qkv" in text and "reference.qkv" in text and "kernel:" in text


def test_plugins(ctx):
    plugins = ctx.plugins()
    by_name = {p.name: p for p in plugins}
    assert by_name["cpu"].status == "loaded" and by_name["cpu"].kernels
    ops = {"gemm", "rmsnorm", "softmax", "swiglu", "rope", "attention", "mlp", "qkv"}
    assert all(k.op in ops for p in plugins for k in p.kernels)
    # The cpu plugin has kernels of every op (of qkv perhaps none: its built-in chain and the reference race any).
    assert ops - {"qkv"} <= {k.op for k in by_name["cpu"].kernels} <= ops
    assert {"chain.qkv", "reference.qkv"} <= {k.name for p in plugins for k in p.kernels if k.op == "qkv"}
    assert all(p.reason for p in plugins if p.status != "loaded")  # every refusal says why
    assert any(p.trust == "oracle" for p in plugins)
    json.loads(json.dumps([p.to_dict() for p in plugins]))
    assert "cpu" in str(by_name["cpu"])


def test_verify(ctx):
    report = ctx.verify("gemm f32 m=32 n=32 k=32")
    assert report.verdicts and report.passed >= 1 and report.failed == 0
    results = {v.kernel: v.result for v in report.verdicts}
    assert any(r == "passed" for r in results.values())
    assert all(r in ("passed", "failed", "refuses", "oracle") for r in results.values())
    one = next(k for k, r in results.items() if r == "passed")
    single = ctx.verify("gemm f32 m=32 n=32 k=32", kernel=one)
    assert [v.kernel for v in single.verdicts] == [one] and single.verdicts[0].passed
    assert "passed" in str(report)
    assert json.loads(report.to_json())["problem"] == report.problem


def test_tune_writes_a_table_that_a_context_then_uses(tmp_path):
    table = tmp_path / "table.toml"
    calls = []
    with arbiter.Context() as context:
        report = context.tune(["softmax f32 rows=8 cols=64", "gemm f32 m=16 n=16 k=16"], table=table,
                              progress=lambda done, total, problem: calls.append((done, total, problem)))
    assert table.is_file() and "softmax" in table.read_text()
    assert [c[:2] for c in calls][-1] == (2, 2) and calls[0][:2] == (0, 2)
    assert len(report.results) == 2 and all(r.winner for r in report.results)
    assert all(r.median_s > 0 for r in report.results)
    assert report.method and "softmax f32 rows=8 cols=64" in report.winners
    assert "| problem |" in str(report)
    assert json.loads(report.to_json())["results"][0]["candidates"]
    dataclasses.asdict(report)
    # A context configured with that table replays it.
    with arbiter.Context(f'[table]\npath = "{table}"\n') as tuned:
        assert "table" in tuned.explain("softmax f32 rows=8 cols=64")


def test_tune_a_suite_file(tmp_path):
    suite = tmp_path / "suite.toml"
    suite.write_text('name = "tiny"\ndescription = "two shapes"\norigin = "a test"\n'
                     '[[problem]]\nproblem = "softmax f32 rows=2 cols=32"\norigin = "here"\n')
    with arbiter.Context() as context:
        report = context.tune(suite, table="", progress=False)
    assert [r.problem for r in report.results] == ["softmax f32 rows=2 cols=32"] and report.table is None


def test_tune_progress_exception_stops_and_propagates():
    class Stop(Exception):
        pass

    def progress(done, total, problem):
        if done == 1:
            raise Stop()

    with arbiter.Context() as context, pytest.raises(Stop):
        context.tune(["softmax f32 rows=2 cols=16", "softmax f32 rows=2 cols=32", "softmax f32 rows=2 cols=48"],
                     table="", progress=progress)


def test_a_context_is_quiet_on_a_host_without_a_gpu():
    # "No GPU" is an expected state: the CUDA plugins are listed as rejected with the reason, and
    # creating a context logs nothing.
    import os
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", "import arbiter; arbiter.Context().plugins()"],
                            capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr


def test_the_example_script_runs():
    # examples/python_quickstart.py, as the README points to it: every op checked, explain,
    # plugins, verify, a tune into a table that a second context replays.
    import os
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python_quickstart.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=dict(os.environ),
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert "gemm: max |error|" in result.stdout and "tuning table entry" in result.stdout
    assert "swiglu: max relative error" in result.stdout
