"""What explain's siblings return: plain dataclasses that print readably (``str()``) and
convert to JSON (``to_json()``) or dicts (``dataclasses.asdict``). Their fields are those of the
C library's reports (docs/python.md lists them)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import List, Optional


def _build(cls, data: dict, **nested):
    """cls from a dict, ignoring keys this version does not know (reports only ever grow)."""
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in data.items() if k in names}
    for key, (item_cls) in nested.items():
        values[key] = [item_cls.from_dict(x) for x in data.get(key, [])]
    return cls(**values)


class _Report:
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), **kwargs)


def _us(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.3g} us"


@dataclass
class Kernel(_Report):
    name: str
    op: str
    device: str
    provenance: str
    priority: int
    nondeterministic: bool = False
    tf32: bool = False

    @classmethod
    def from_dict(cls, d):
        return _build(cls, d)


@dataclass
class Plugin(_Report):
    name: str
    status: str  # "loaded", "disabled" or "rejected"
    reason: str  # why rejected or disabled; "" when loaded
    path: str
    version: str = ""
    build_id: str = ""
    description: str = ""
    abi: str = ""
    provenance: str = ""
    priority: int = 0
    runtime_version: str = ""
    sha256: str = ""
    origin: str = ""
    trust: str = "none"
    kernels: List[Kernel] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d):
        return _build(cls, d, kernels=Kernel)

    def __str__(self) -> str:
        head = f"{self.name or '?'} {self.version} [{self.status}] {self.path}"
        if self.reason:
            head += f"\n  reason: {self.reason}"
        return "\n".join([head] + [f"  {k.name} ({k.op}, {k.device}, {k.provenance})" for k in self.kernels])


@dataclass
class Verdict(_Report):
    kernel: str
    result: str  # "passed", "failed", "refuses" (does not support the problem) or "oracle"
    summary: str = ""
    detail: str = ""
    plugin: str = ""
    provenance: str = ""

    @classmethod
    def from_dict(cls, d):
        return _build(cls, d)

    @property
    def passed(self) -> bool:
        return self.result == "passed"


@dataclass
class VerifyReport(_Report):
    problem: str
    verdicts: List[Verdict] = field(default_factory=list)
    passed: int = 0
    failed: int = 0

    @classmethod
    def from_dict(cls, d):
        return _build(cls, d, verdicts=Verdict)

    def __str__(self) -> str:
        lines = [self.problem]
        for v in self.verdicts:
            lines.append(f"  {v.kernel:<28} {v.result:<8} {v.summary}")
            lines += [f"      {line}" for line in v.detail.splitlines() if v.result == "failed"]
        lines.append(f"{self.passed} passed, {self.failed} failed")
        return "\n".join(lines)


@dataclass
class Candidate(_Report):
    kernel: str
    status: str
    verdict: str = ""
    median_s: Optional[float] = None
    p20_s: Optional[float] = None
    p80_s: Optional[float] = None
    samples: int = 0

    @classmethod
    def from_dict(cls, d):
        return _build(cls, d)


@dataclass
class TuneResult(_Report):
    problem: str
    key: str
    winner: Optional[str] = None
    median_s: Optional[float] = None
    runner_up: Optional[str] = None
    margin: Optional[float] = None  # the runner-up's median over the winner's, minus one
    kept_incumbent: bool = False
    origin: Optional[str] = None
    candidates: List[Candidate] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d):
        return _build(cls, d, candidates=Candidate)


@dataclass
class TuneReport(_Report):
    method: str = ""
    table: Optional[str] = None
    elapsed_s: float = 0.0
    cancelled: bool = False
    results: List[TuneResult] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d):
        return _build(cls, d, results=TuneResult)

    @property
    def winners(self) -> dict:
        """problem -> winning kernel (None where no kernel passed)."""
        return {r.problem: r.winner for r in self.results}

    def __str__(self) -> str:
        lines = ["| problem | winner | median | runner-up | margin |", "| --- | --- | ---: | --- | ---: |"]
        for r in self.results:
            margin = "-" if r.margin is None else f"{r.margin * 100:.1f}%"
            kept = " (kept)" if r.kept_incumbent else ""
            lines.append(f"| {r.problem} | {r.winner or '-'}{kept} | {_us(r.median_s)} | {r.runner_up or '-'} | {margin} |")
        lines.append(f"method: {self.method}")
        lines.append(f"tuning time: {self.elapsed_s:.1f} s" + (f"; table: {self.table}" if self.table else "")
                     + ("; cancelled" if self.cancelled else ""))
        return "\n".join(lines)
