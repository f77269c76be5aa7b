"""The mirror's read-back of facts this worker applied as it appended them (processors/state/mirror.py)."""

from __future__ import annotations

from typing import Any

import msgspec

from domain import keys
from domain.facts import BlockPlaced, Fact
from domain.features import FeatureView
from domain.store import MemoryStore
from infra.control import Generation
from infra.settings import load_settings
from processors.state.mirror import FactMirror
from tests.test_mirror import block


class CountingView(FeatureView):
    """The view, noting each fact it is asked to apply."""

    def __init__(self) -> None:
        self.memory = MemoryStore()
        super().__init__(self.memory, load_settings({}).rules.scoring)
        self.applied: list[str] = []

    def apply(self, fact: Fact) -> bool:
        self.applied.append(fact.id)
        return super().apply(fact)


def mirror_of(view: FeatureView) -> FactMirror:
    settings = load_settings({})
    return FactMirror(settings, view, Generation(), lambda: True)


def blocked(view: FeatureView, fact: BlockPlaced) -> Any:
    return view.store.get(keys.View.block(fact.account_id, fact.number, fact.caller))


def test_a_fact_read_back_after_the_worker_applied_it_is_not_applied_again() -> None:
    view = CountingView()
    mirror = mirror_of(view)
    own, other = block(1), block(2)
    mirror.own(own)
    assert view.applied == [own.id]
    mirror.apply(mirror.decisions, msgspec.json.encode(own))
    mirror.apply(mirror.decisions, msgspec.json.encode(other))
    # Another worker's fact is applied as it is read; this worker's own is in the view already.
    assert view.applied == [own.id, other.id]
    assert blocked(view, own)["alert_id"] == "alrt_1"
    assert blocked(view, other)["alert_id"] == "alrt_2"


def test_a_second_copy_of_an_own_fact_is_applied_and_changes_nothing() -> None:
    view = CountingView()
    mirror = mirror_of(view)
    fact = block(1)
    mirror.own(fact)
    before = dict(view.memory.data)
    for _ in range(2):
        mirror.apply(mirror.decisions, msgspec.json.encode(fact))
    # Only the first copy read back is skipped; the one appended again (a refold's) goes through the view.
    assert view.applied == [fact.id, fact.id]
    assert view.memory.data == before


def test_a_record_without_an_id_is_skipped_as_one_the_view_cannot_read() -> None:
    view = CountingView()
    mirror = mirror_of(view)
    mirror.own(block(1))
    mirror.apply(mirror.decisions, b'{"kind":"block.placed"}')
    assert view.applied == [block(1).id]
