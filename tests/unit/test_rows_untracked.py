"""Rows kept decoded cost the cyclic collector nothing (docs/decisions/0017-call-rows-kept-decoded.md).

The worker keeps the rows it folds decoded (`processors/state/row_cache.py`); each object the collector
tracks is one more it walks in every full collection. Domain structs are `gc=False` and keep their
arrays as tuples, which the collector stops tracking at the first young collection they live through.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil
import random
import uuid
from typing import Any

import msgspec

import domain
from bench.traffic import full_call
from callscreen.testing import Harness
from domain.calls import CallState, Stored
from domain.detectors import NumberWindow
from domain.rules import LimitRules
from domain.validation import Stamp, TimeBounds, parse_event

AT = 1_795_000_000_000


def tracked_inside(value: Any) -> list[Any]:
    """Every object reachable from `value` through struct fields, tuples, lists and dicts that the collector tracks."""
    found, seen, stack = [], set(), [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if gc.is_tracked(item):
            found.append(item)
        if isinstance(item, msgspec.Struct):
            stack += [getattr(item, name) for name in item.__struct_fields__]
        elif isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple):
            stack += item
    return found


def folded_rows(geo: bool) -> tuple[CallState, NumberWindow]:
    """A call's row after its start and all its turns (not yet ended), and its number's detector window."""
    harness = Harness()
    bodies = full_call(random.Random(3), "c1", "+14155550100", AT - 1_000)
    if geo:
        bodies[0]["attrs"] = {"geo": {"zip": "94110", "city": "San Francisco", "region": "CA"}}
    for body in bodies[:-1]:
        stamp = Stamp(uuid.uuid4().hex, "acct1", "guard", AT)
        harness.fold(parse_event(body, stamp, TimeBounds.of(LimitRules())))
    (call,) = harness.calls.values()
    (window,) = harness.windows.values()
    assert isinstance(call, CallState) and len(call.live.recent) == len(bodies) - 2
    return call, window


def test_every_domain_struct_is_left_out_of_the_collector() -> None:
    structs = []
    for module_info in pkgutil.iter_modules(domain.__path__):
        module = importlib.import_module(f"domain.{module_info.name}")
        structs += [
            value
            for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, msgspec.Struct) and value.__module__ == module.__name__
        ]
    assert len(structs) >= 30
    assert [s.__qualname__ for s in structs if s.__struct_config__.gc] == []


def test_a_call_row_and_its_number_window_decoded_are_untracked_after_a_young_collection() -> None:
    call, window = folded_rows(geo=False)
    decoded_call = msgspec.json.decode(msgspec.json.encode(call), type=Stored)
    decoded_window = msgspec.json.decode(msgspec.json.encode(window), type=NumberWindow)
    gc.collect(0)
    assert tracked_inside(decoded_call) == []
    assert tracked_inside(decoded_window) == []


def test_a_call_row_as_the_fold_wrote_it_is_untracked_after_a_young_collection() -> None:
    call, window = folded_rows(geo=False)
    gc.collect(0)
    assert tracked_inside(call) == []
    assert tracked_inside(window) == []


def test_attributes_that_nest_are_the_one_object_tracked() -> None:
    # A dict holding a dict stays tracked: the platform's own attributes are any JSON object.
    call, _ = folded_rows(geo=True)
    decoded = msgspec.json.decode(msgspec.json.encode(call), type=Stored)
    assert isinstance(decoded, CallState)
    gc.collect(0)
    assert [id(item) for item in tracked_inside(decoded)] == [id(decoded.attrs)]
