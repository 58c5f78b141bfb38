"""One name per concept (issue 29, point 4; docs/glossary.md), checked on the code of the
product, the benchmarks, the scripts and the tests: the round is ``round_s`` (never ``round_length``,
``slot_s`` or a ``slot``-named knob), the restart penalty ``restart_penalty_s``, HadarE's
averaging cost ``aggregation_overhead_s``, the grace ``grace_s``. The older spellings are spelt
only by ``hadar/core/renames.py``, which maps what a user may still hand over in them (and by the
tests that check so, ``HOMES``).

Checked: every identifier (variables, parameters, attributes, keywords, functions, classes,
imports) and every string constant that is one identifier (a dict key, a column, an argparse
``dest``), f-strings included. Prose is not: docstrings, comments and messages may say "slot",
the paper's word. A ``slot``-named knob is a round where it holds seconds (a ``_s`` name, annotated ``float``,
assigned from a ``round_s`` or a float literal), or it is one of the sweep's former names
(``FORMER``); a rank's device slot (``RankSlot``, ``rank_slot``) or a copy's slot is another
concept."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from hadar.core.renames import RENAMED

ROOT = Path(__file__).resolve().parents[2]
TOPS = (
    "hadar",
    "hadare",
    "baselines",
    "primal_dual",
    "estimators",
    "tracker",
    "nodes",
    "goodput",
    "benchmarks",
    "scripts",
    "tests",
)
HOMES = (
    "hadar/core/renames.py",
    "tests/hadar/core/test_renames.py",
    "tests/packaging/test_one_name.py",
    "tests/packaging/test_one_place.py",
)
"""The modules that may spell an old name: the map of old to new, and the tests that check the
old spellings still work or never come back."""

OLD: frozenset[str] = frozenset(RENAMED) | {"aggregation_overhead", "grace"}
"""Old names, and seconds knobs spelt without their ``_s``."""

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CANDIDATE = re.compile("slot|" + "|".join(sorted(OLD)), re.IGNORECASE)
"""Text that every finding contains: a file without it is not parsed (speed only)."""


FORMER = frozenset(
    {
        "slot_sweep",
        "print_slot_sweep",
        "paper_best_slot",
        "PAPER_BEST_SLOT",
        "PAPER_SLOT_FIGURES",
        "cru_by_slot",
    }
)
"""Names of the paper experiment's round sweep before the rename that hold no seconds."""


def _slot_word(name: str) -> bool:
    """``slot`` or ``slots`` is one of the snake-case words of ``name`` (``main_slot``, not
    ``RankSlot``)."""
    return bool({"slot", "slots"} & set(name.lower().split("_")))


def _mentions_round(node: ast.AST | None) -> bool:
    return node is not None and any(
        (isinstance(n, ast.Attribute) and n.attr == "round_s")
        or (isinstance(n, ast.Name) and n.id == "round_s")
        for n in ast.walk(node)
    )


def _float_annotation(node: ast.expr | None) -> bool:
    return node is not None and "float" in ast.unparse(node)


def _seconds_literal(node: ast.expr | None) -> bool:
    """A float literal or a tuple/list of them (``(90.0, 180.0, 360.0)``)."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_seconds_literal(e) for e in node.elts)
    return isinstance(node, ast.Constant) and type(node.value) is float


def _holds_seconds(value: ast.expr | None, annotation: ast.expr | None = None) -> bool:
    return _float_annotation(annotation) or _mentions_round(value) or _seconds_literal(value)


def _names(tree: ast.AST) -> Iterator[tuple[str, int, str]]:
    """(name, line, how) of every identifier ``tree`` spells, and of string constants that are
    one identifier (not docstrings)."""
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    for n in ast.walk(tree):
        line = getattr(n, "lineno", 0)
        if isinstance(n, ast.Name):
            yield n.id, line, "name"
        elif isinstance(n, ast.Attribute):
            yield n.attr, line, "attribute"
        elif isinstance(n, ast.arg):
            yield n.arg, line, "parameter"
        elif isinstance(n, ast.keyword) and n.arg is not None:
            yield n.arg, line, "keyword"
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield n.name, line, "definition"
        elif isinstance(n, ast.alias):
            yield (n.asname or n.name).split(".")[-1], line, "import"
        elif (
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and id(n) not in docstrings
            and IDENTIFIER.fullmatch(n.value)
        ):
            yield n.value, line, "string"


def _round_slots(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """A ``slot``-named variable, parameter or field holding seconds: annotated ``float``,
    assigned from a ``round_s`` or a float literal (or a tuple of them)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.arg) and _slot_word(n.arg) and _float_annotation(n.annotation):
            yield n.arg, n.lineno
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            if _slot_word(n.target.id) and _holds_seconds(n.value, n.annotation):
                yield n.target.id, n.lineno
        elif isinstance(n, ast.Assign) and _holds_seconds(n.value):
            for target in n.targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Name) and _slot_word(t.id):
                        yield t.id, n.lineno


def old_spellings(files: dict[str, str]) -> list[str]:
    """``"FILE:LINE: NAME (how)"`` for each old name of a concept in ``files`` (path -> source)."""
    out = []
    for path, text in sorted(files.items()):
        if path in HOMES or not CANDIDATE.search(text):
            continue
        tree = ast.parse(text)
        found = {
            (line, name, how)
            for name, line, how in _names(tree)
            if name in OLD or name in FORMER or (_slot_word(name) and name.lower().endswith("_s"))
        }
        found |= {(line, name, "holds a round") for name, line in _round_slots(tree)}
        out += [f"{path}:{line}: {name} ({how})" for line, name, how in sorted(found)]
    return out


def _code() -> dict[str, str]:
    files = sorted(p for top in TOPS for p in (ROOT / top).rglob("*.py"))
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in files}


def test_no_old_name_of_a_concept_in_the_code() -> None:
    assert old_spellings(_code()) == []


def test_the_renames_module_maps_every_old_name_to_a_current_one() -> None:
    assert set(RENAMED.values()) == {"round_s", "restart_penalty_s"}
    assert not set(RENAMED) & set(RENAMED.values())


def test_the_check_catches_old_names_and_only_them() -> None:
    source = (
        '"""A docstring may say round_length and slot."""\n'
        "DEFAULT_SLOTS = (90.0, 180.0)\n"
        "def run(cfg, round_length: float, slot: float, copies) -> None:\n"
        "    slots = [CopySlot(n) for n in copies]  # another concept: a copy's slot\n"
        "    slot = cfg.round_s\n"
        "    print(f'{cfg.restart_penalty:g} s, {best_slot_s}', slot_sweep(rows))\n"
        "    row = {'slot_s': 1, 'round_s': 2, 'slot time': 3}\n"
        "    p.add_argument('--grace', dest='grace')\n"
        "    for rank_slot in layout(slot=DEFAULT_SLOTS): env(rank_slot, round_s=1)\n"
        "class Spec:\n"
        "    main_slot: float = 360.0\n"
        "class RankSlot:\n"
        "    slot: int = 0\n"
    )
    assert old_spellings({"mod.py": source, HOMES[0]: source}) == [
        "mod.py:2: DEFAULT_SLOTS (holds a round)",
        "mod.py:3: round_length (parameter)",
        "mod.py:3: slot (holds a round)",
        "mod.py:5: slot (holds a round)",
        "mod.py:6: best_slot_s (name)",
        "mod.py:6: restart_penalty (attribute)",
        "mod.py:6: slot_sweep (name)",
        "mod.py:7: slot_s (string)",
        "mod.py:8: grace (string)",
        "mod.py:11: main_slot (holds a round)",
    ]
