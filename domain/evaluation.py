"""Evaluation (decisions section 17): how the live answers of an account's labelled calls stand against
their labels. Pure functions over plain counts.

A positive is a `reject`: precision is spam rejected over rejected, recall spam rejected over spam, and the
false-positive rate good rejected over good, each `None` when nothing is under it. A tally is counted per
partition and the partitions' tallies are added up, so the arithmetic is the same however the calls spread.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from domain.labels import GOOD, LABELS, SPAM

ACTIONS = ("allow", "review", "reject")
POSITIVE = "reject"
# Ratios are given to four places, as reputation scores are.
PLACES = 4

Tally = dict[str, Any]


def empty() -> Tally:
    return {"labelled": 0, "matrix": {action: dict.fromkeys(LABELS, 0) for action in ACTIONS}, "by_reason": {}}


def count(tally: Tally, action: str, reasons: Iterable[str], label: str) -> None:
    """One labelled call answered `action` for `reasons`."""
    tally["labelled"] += 1
    tally["matrix"][action][label] += 1
    for reason in reasons:
        cell = tally["by_reason"].setdefault(reason, dict.fromkeys(LABELS, 0))
        cell[label] += 1


def add(total: Tally, part: Tally) -> None:
    """`part` (another partition's tally) added into `total`."""
    total["labelled"] += part["labelled"]
    for action in ACTIONS:
        for label in LABELS:
            total["matrix"][action][label] += part["matrix"][action][label]
    for reason, cell in part["by_reason"].items():
        mine = total["by_reason"].setdefault(reason, dict.fromkeys(LABELS, 0))
        for label in LABELS:
            mine[label] += cell[label]


def ratio(top: int, bottom: int) -> float | None:
    return None if bottom == 0 else round(top / bottom, PLACES)


def report(tally: Tally) -> dict[str, Any]:
    """The body of `GET /v1/evaluation`: the tally with its three rates."""
    matrix = tally["matrix"]
    spam = sum(matrix[action][SPAM] for action in ACTIONS)
    good = sum(matrix[action][GOOD] for action in ACTIONS)
    rejected = matrix[POSITIVE][SPAM] + matrix[POSITIVE][GOOD]
    return {
        "labelled": tally["labelled"],
        "matrix": matrix,
        "precision": ratio(matrix[POSITIVE][SPAM], rejected),
        "recall": ratio(matrix[POSITIVE][SPAM], spam),
        "false_positive_rate": ratio(matrix[POSITIVE][GOOD], good),
        "by_reason": dict(sorted(tally["by_reason"].items())),
    }
