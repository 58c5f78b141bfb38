"""Word vocabularies capped at a model's fixed size, built deterministically from training text."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from hadar.core.errors import InputError

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def simple_tokenize(line: str) -> list[str]:
    """Lower-cased words and single punctuation marks (for Multi30k sentences)."""
    return _WORD.findall(line.lower())


class Vocab:
    """``specials`` first, then the most frequent words (ties alphabetical), ``size`` ids in all.

    Words outside the vocabulary map to ``unk``.
    """

    def __init__(self, counts: Counter[str], size: int, specials: Sequence[str], unk: str) -> None:
        words = [
            w
            for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            if w not in specials
        ]
        self.itos = list(specials) + words[: max(size - len(specials), 0)]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.unk = self.stoi[unk]

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, words: Iterable[str]) -> list[int]:
        get, unk = self.stoi.get, self.unk
        return [get(w, unk) for w in words]


def read_lines(path: Path, field: str = "data") -> list[str]:
    """All lines of a UTF-8 text file, or a one-line InputError naming ``field`` and the file."""
    if not path.is_file():
        raise InputError(f"{field}: missing file {path}")
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"{field}: {path} is not UTF-8 text ({exc.reason})") from None
