"""`domain.adapters.base.backfill`: a post-call transcript's entries as turn bodies by their time, each
numbered `turn` by its entry's place in the platform's list (decisions section 16; docs/api.md, a turn
event that names its `turn` is counted once however often it is posted)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from domain.adapters.base import Body, backfill
from domain.validation import InputError
from tests.unit.adapters.adapter_checks import refused


def spoken(entry: Mapping[str, Any], path: str) -> list[tuple[int, Body]]:
    """A reader like the platforms': an entry with `said` is one `turn.ended` at `at`, any other nobody's."""
    if "said" not in entry:
        return []
    return [(entry["at"], {"type": "turn.ended", "role": entry["role"], "text": entry["said"]})]


def uttered(entry: Mapping[str, Any], path: str) -> list[tuple[int, Body]]:
    """A reader like Retell's: each entry a start at `from` and an end at `to`."""
    return [
        (entry["from"], {"type": "turn.started", "role": entry["role"]}),
        (entry["to"], {"type": "turn.ended", "role": entry["role"]}),
    ]


def test_each_turn_is_numbered_by_its_entrys_place_in_the_list() -> None:
    entries = [
        {"role": "agent", "at": 100, "said": "hello"},
        {"role": "user", "at": 200, "said": "hi"},
        {"role": "agent", "at": 300, "said": "bye"},
    ]
    assert backfill(entries, "transcript", spoken) == [
        {"type": "turn.ended", "role": "agent", "text": "hello", "turn": 0},
        {"type": "turn.ended", "role": "user", "text": "hi", "turn": 1},
        {"type": "turn.ended", "role": "agent", "text": "bye", "turn": 2},
    ]


def test_an_entry_nobody_spoke_leaves_its_number_unused() -> None:
    entries = [
        {"role": "agent", "at": 100, "said": "hello"},
        {"role": "tool", "at": 150},
        {"role": "robot", "at": 160},
        {"role": "user", "at": 200, "said": "hi"},
    ]
    assert [body["turn"] for body in backfill(entries, "transcript", spoken)] == [0, 3]


def test_the_turns_go_by_time_but_keep_the_number_of_their_place() -> None:
    entries = [
        {"role": "user", "at": 300, "said": "third"},
        {"role": "agent", "at": 100, "said": "first"},
        {"role": "user", "at": 200, "said": "second"},
    ]
    assert [(body["text"], body["turn"]) for body in backfill(entries, "transcript", spoken)] == [
        ("first", 1),
        ("second", 2),
        ("third", 0),
    ]


def test_both_bodies_of_one_entry_carry_its_number() -> None:
    entries = [{"role": "agent", "from": 100, "to": 400}, {"role": "user", "from": 300, "to": 500}]
    assert backfill(entries, "transcript_object", uttered) == [
        {"type": "turn.started", "role": "agent", "turn": 0},
        # The caller spoke over the agent: their start comes before the agent's end.
        {"type": "turn.started", "role": "user", "turn": 1},
        {"type": "turn.ended", "role": "agent", "turn": 0},
        {"type": "turn.ended", "role": "user", "turn": 1},
    ]


def test_a_start_stays_before_its_own_end_at_the_same_time() -> None:
    # A one-word utterance can begin and end on the same millisecond; the sort is stable.
    entries = [{"role": "user", "from": 200, "to": 200}, {"role": "agent", "from": 100, "to": 100}]
    assert backfill(entries, "transcript_object", uttered) == [
        {"type": "turn.started", "role": "agent", "turn": 1},
        {"type": "turn.ended", "role": "agent", "turn": 1},
        {"type": "turn.started", "role": "user", "turn": 0},
        {"type": "turn.ended", "role": "user", "turn": 0},
    ]


def test_entries_at_the_same_time_keep_their_order_in_the_list() -> None:
    entries = [
        {"role": "user", "at": 100, "said": "a"},
        {"role": "agent", "at": 100, "said": "b"},
        {"role": "user", "at": 100, "said": "c"},
    ]
    assert [body["turn"] for body in backfill(entries, "transcript", spoken)] == [0, 1, 2]


def test_the_reader_is_given_each_entrys_path_and_its_bodies_are_not_changed() -> None:
    seen: list[str] = []
    given: list[Body] = []

    def read(entry: Mapping[str, Any], path: str) -> list[tuple[int, Body]]:
        seen.append(path)
        body: Body = {"type": "turn.ended", "role": "user"}
        given.append(body)
        return [(entry["at"], body)]

    backfill([{"at": 1}, {"at": 2}], "data.transcript", read)
    assert seen == ["data.transcript[0]", "data.transcript[1]"]
    assert all("turn" not in body for body in given)


def test_no_transcript_is_no_turn() -> None:
    assert backfill(None, "transcript", spoken) == []
    assert backfill([], "transcript", spoken) == []


@pytest.mark.parametrize("entries", [{"0": {"said": "hi"}}, "hello", 3, True])
def test_a_transcript_that_is_not_a_list_is_named_by_its_path(entries: Any) -> None:
    with pytest.raises(InputError) as excinfo:
        backfill(entries, "call.transcript_object", uttered)
    refused(excinfo, "call.transcript_object")


@pytest.mark.parametrize("entry", ["hello", None, ["agent"], 7])
def test_an_entry_that_is_not_an_object_is_named_by_its_place(entry: Any) -> None:
    entries = [{"role": "agent", "at": 100, "said": "hello"}, entry]
    with pytest.raises(InputError) as excinfo:
        backfill(entries, "data.transcript", spoken)
    refused(excinfo, "data.transcript[1]")


def test_a_readers_refusal_passes_through() -> None:
    def read(entry: Mapping[str, Any], path: str) -> list[tuple[int, Body]]:
        raise InputError("invalid_payload", field=f"{path}.created_at")

    with pytest.raises(InputError) as excinfo:
        backfill([{}], "transcripts", read)
    refused(excinfo, "transcripts[0].created_at")
