"""Labels (decisions section 17): a call's verdict from its owner or its platform, and what the call then
counts for in its caller's history. Pure functions.

A call has at most one standing label. The owner's (`POST /v1/calls/<id>/label`, the dashboard) is the
latest one posted; a platform's `disposition` on `call.ended` is taken only while the owner has said
nothing, so the owner's label wins whichever comes first.

In the caller's history a label stands for the call's settled spam score: a call labelled `good` counts
as a good call (never as one at or above the bad bounds), one labelled `spam` as a bad call above the
good bound, and as a spam label, which trips `prior_bad` on the account's own history (`History.labelled_spam`)
and, through the accounts' agreement, network-wide (docs/rules.md, Network evidence). An unlabelled call
counts by its settled score, as before labels.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain.rules import ScoringRules

SPAM = "spam"
GOOD = "good"
LABELS = (SPAM, GOOD)
# Who gave a call's standing label.
OWNER = "owner"
PLATFORM = "platform"

# What a call adds to a history row: counts the history already keeps, and its calls labelled spam and good
# (under `LABEL_COUNTS`, by label).
# `above` first: a history folded before it was counted reads it from `bad` as it was.
COUNTED = ("above", "good", "bad")
LABELLED = {SPAM: "labelled_spam", GOOD: "labelled_good"}
LABEL_COUNTS = "labels"


class Mark(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """What one call says of its caller: its standing label and its settled spam score, each with whether
    an API key gave it (a history's `keyed` part counts only what keys posted), and the label's sequence
    number in the call (a label fact folded again, or behind a later one, changes nothing)."""

    label: str | None = None
    label_key: bool = True
    spam: int | None = None
    spam_key: bool = True
    seq: int = 0


def counts(label: str | None, spam: int | None, rules: ScoringRules) -> dict[str, int]:
    """What a call with `label` and settled `spam` score adds to its caller's history."""
    if label == GOOD:
        return {"good": 1, "bad": 0, "above": 0, "labelled_spam": 0, "labelled_good": 1}
    if label == SPAM:
        return {"good": 0, "bad": 1, "above": 1, "labelled_spam": 1, "labelled_good": 0}
    if spam is None:
        return {"good": 0, "bad": 0, "above": 0, "labelled_spam": 0, "labelled_good": 0}
    return {
        "good": int(spam < rules.prior_good_below),
        "bad": int(spam >= rules.prior_bad_spam),
        "above": int(spam > rules.prior_good_none_above),
        "labelled_spam": 0,
        "labelled_good": 0,
    }


def mark_counts(mark: Mark, rules: ScoringRules, keyed: bool = False) -> dict[str, int]:
    """What the call marked `mark` adds to a history, or (`keyed`) to the part of it API keys posted."""
    if not keyed:
        return counts(mark.label, mark.spam, rules)
    return counts(mark.label if mark.label_key else None, mark.spam if mark.spam_key else None, rules)


def change(before: Mark, after: Mark, rules: ScoringRules, keyed: bool = False) -> dict[str, int]:
    """What a history gains (or loses) when a call's mark goes from `before` to `after`."""
    old, new = mark_counts(before, rules, keyed), mark_counts(after, rules, keyed)
    return {name: new[name] - old[name] for name in new}


def add(row: dict[str, Any], delta: dict[str, int]) -> None:
    """`delta` (`change`) added to a history row: its counts, and its calls labelled spam and good."""
    for name in COUNTED:
        if delta[name]:
            # A history folded before `above` was counted: its calls at 70 or more stand in for it.
            base = row.get(name, row["bad"]) if name == "above" else row.get(name, 0)
            row[name] = base + delta[name]
    if delta[LABELLED[SPAM]] or delta[LABELLED[GOOD]]:
        labels = dict(row.get(LABEL_COUNTS) or {})
        for name in LABELS:
            labels[name] = labels.get(name, 0) + delta[LABELLED[name]]
        row[LABEL_COUNTS] = labels


def labelled(row: dict[str, Any] | None) -> tuple[bool, bool]:
    """Whether a history row holds a call labelled spam, and one labelled good."""
    labels = (row or {}).get(LABEL_COUNTS) or {}
    return labels.get(SPAM, 0) > 0, labels.get(GOOD, 0) > 0


def disposition_taken(label_by: str | None, label: str | None, disposition: str | None) -> bool:
    """Whether a platform's `disposition` becomes the call's label: only while its owner has said nothing,
    and only when it says something new."""
    return disposition is not None and label_by != OWNER and label != disposition
