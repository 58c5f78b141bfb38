"""Defaults and policies are each defined in one place , checked on the
product's source: a policy's name is spelt only by the module that registers it, by
``hadar/core/defaults.py`` (each driver's default policy) and by ``hadar/experiments/paper.py``
(what the paper compared); a knob named after a shared default (round, restart penalty,
aggregation overhead, grace, size) never spells that default's value as a literal, it refers to
``hadar/core/defaults.py``. Docstrings and comments may name anything."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

from hadar.core.defaults import PROJECT_PACKAGES, REAL_RUN, SIMULATED
from hadar.policy import POLICY_REGISTRY

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = PROJECT_PACKAGES

POLICY_NAME_HOMES = ("hadar/core/defaults.py", "hadar/experiments/paper.py")
"""Modules that may spell any policy's name besides the policy's own module."""

OTHER_MEANINGS: dict[str, set[str]] = {
    "hadar/cli.py": {"hadar"},  # the program's name (argparse prog)
    "hadar/commands/background.py": {"hadar"},  # `python -m hadar`: the package
    "hadar/policy.py": {"hadare"},  # POLICY_PACKAGES names the hadare package the registry scans
    "hadar/workloads/gavel_trace.py": {"gavel"},  # the job spec key holding a Gavel trace's fields
    # the node-stream replay (hadar.simulator.malleable, outside the round loop) names its three
    # modes of scalability knowledge like the round-loop policies that reproduce them
    "hadar/simulator/malleable.py": {"bftrainer", "freetrain", "malletrain"},
}
"""Strings equal to a policy's name that mean something else where they appear."""

CONCEPTS: dict[str, tuple[str, ...]] = {
    "round_s": ("round_s", "round_length", "slot", "slot_s"),
    "restart_penalty_s": ("restart_penalty_s", "restart_penalty"),
    "aggregation_overhead_s": ("aggregation_overhead_s", "aggregation_overhead"),
    "grace_s": ("grace_s", "grace"),
    "size": ("size",),
}
"""Each shared default (a field of hadar/core/defaults.py) and the names a knob for it may have
(docs/glossary.md)."""


def _sources() -> list[Path]:
    return sorted(p for top in PACKAGES for p in (ROOT / top).rglob("*.py"))


def _strings(tree: ast.AST) -> Iterator[ast.Constant]:
    """String constants that are not docstrings (a bare string statement)."""
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare:
            yield node


def policy_name_spellings(
    files: dict[str, str], names: set[str], homes: dict[str, set[str]]
) -> list[str]:
    """``"FILE:LINE: 'NAME'"`` for each policy name spelt in ``files`` (path -> source) outside
    the places ``homes`` (path -> the names it may spell) allows."""
    out = []
    for path, text in sorted(files.items()):
        allowed = homes.get(path, set())
        for node in _strings(ast.parse(text)):
            if node.value in names and node.value not in allowed:
                out.append(f"{path}:{node.lineno}: {node.value!r}")
    return out


def _literal(node: ast.expr | None) -> object:
    if isinstance(node, ast.Constant) and not isinstance(node.value, bool):
        return node.value
    return None


def _named_defaults(tree: ast.AST) -> Iterator[tuple[str, int, object]]:
    """(name, line, literal default) of parameters, annotated fields and ``--flag`` options."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(
                zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True)
            )
            pairs += [
                (arg, d)
                for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                if d is not None
            ]
            for arg, default in pairs:
                yield arg.arg, node.lineno, _literal(default)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, node.lineno, _literal(node.value)
        elif isinstance(node, ast.Call):
            flags = [
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value[:2] == "--"
            ]
            for kw in node.keywords:
                if kw.arg == "default":
                    for flag in flags:
                        yield flag[2:].replace("-", "_"), node.lineno, _literal(kw.value)


def repeated_defaults(files: dict[str, str], values: dict[str, set[object]]) -> list[str]:
    """``"FILE:LINE: NAME = VALUE"`` for each knob named after a shared default (``CONCEPTS``)
    whose default is a literal equal to one of that default's values (``values``)."""
    out = []
    for path, text in sorted(files.items()):
        for name, line, value in _named_defaults(ast.parse(text)):
            for concept, spellings in CONCEPTS.items():
                if name in spellings and value is not None and value in values[concept]:
                    out.append(f"{path}:{line}: {name} = {value!r}")
    return out


def _product() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in _sources()}


def _homes() -> dict[str, set[str]]:
    names = set(POLICY_REGISTRY)
    homes = {path: set(names) for path in POLICY_NAME_HOMES}
    for path, meant in OTHER_MEANINGS.items():
        homes.setdefault(path, set()).update(meant)
    for name, cls in POLICY_REGISTRY.items():
        own = Path(sys.modules[cls.__module__].__file__ or "").resolve()
        if own.is_relative_to(ROOT):  # not a policy an installed plug-in registers
            homes.setdefault(str(own.relative_to(ROOT)), set()).add(name)
    return homes


def test_a_policy_name_is_spelt_only_by_its_own_module() -> None:
    assert policy_name_spellings(_product(), set(POLICY_REGISTRY), _homes()) == []


def test_no_shared_default_is_spelt_twice() -> None:
    values = {
        c: {getattr(SIMULATED, c, None), getattr(REAL_RUN, c, None)} - {None} for c in CONCEPTS
    }
    product = {p: t for p, t in _product().items() if p != "hadar/core/defaults.py"}
    assert repeated_defaults(product, values) == []


def test_the_checks_catch_what_they_forbid() -> None:
    source = (
        '"""Docstrings may say hadare."""\n'
        "def fixed_for(policy: str, size: str = 'paper', round_length: float = 360.0) -> bool:\n"
        "    return policy == 'hadare'\n"
        "class Knobs:\n"
        "    restart_penalty_s: float = 10.0\n"
        "    restart_penalty: float = 0.0\n"
        "p.add_argument('--grace', default=20.0)\n"
    )
    files = {"mod.py": source}
    assert policy_name_spellings(files, {"hadare"}, {}) == ["mod.py:3: 'hadare'"]
    assert policy_name_spellings(files, {"hadare"}, {"mod.py": {"hadare"}}) == []
    values: dict[str, set[object]] = {
        "round_s": {360.0},
        "restart_penalty_s": {10.0},
        "aggregation_overhead_s": set(),
        "grace_s": {20.0},
        "size": {"paper"},
    }
    assert repeated_defaults(files, values) == [
        "mod.py:2: size = 'paper'",
        "mod.py:2: round_length = 360.0",
        "mod.py:5: restart_penalty_s = 10.0",
        "mod.py:7: grace = 20.0",
    ]
