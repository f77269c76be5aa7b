"""The read agent's share of the loop (processors/folds/queries.py): what overdraws it waits it back."""

from __future__ import annotations

import time

import pytest

from processors.folds.queries import LoopShare, expired


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


async def test_answers_within_the_burst_only_give_the_loop_a_turn() -> None:
    clock = Clock()
    share = LoopShare(0.25, burst_s=0.05, clock=clock, sleep=clock.sleep)
    await share.spent(0.02)
    await share.spent(0.03)
    assert clock.slept == [0.0, 0.0]


async def test_an_overdraft_waits_until_a_quarter_of_the_clock_has_paid_it_back() -> None:
    clock = Clock()
    share = LoopShare(0.25, burst_s=0.05, clock=clock, sleep=clock.sleep)
    # 0.05 of credit, 0.075 spent: 0.025 overdrawn, paid back at a quarter of the clock in 0.1 s.
    await share.spent(0.075)
    assert clock.slept == [0.1]
    # The wait refilled the overdraft only: the next answer overdraws by all it spends.
    await share.spent(0.01)
    assert clock.slept == [0.1, 0.04]


@pytest.mark.parametrize(("idle_s", "expected"), [(0.04, 0.0), (10.0, 0.0)])
async def test_idle_time_refills_up_to_the_burst(idle_s: float, expected: float) -> None:
    clock = Clock()
    share = LoopShare(0.25, burst_s=0.05, clock=clock, sleep=clock.sleep)
    await share.spent(0.05)
    clock.now += idle_s
    await share.spent(min(0.01, idle_s * 0.25))
    assert clock.slept == [0.0, expected]


async def test_a_long_idle_spell_never_banks_more_than_the_burst() -> None:
    clock = Clock()
    share = LoopShare(0.25, burst_s=0.05, clock=clock, sleep=clock.sleep)
    clock.now += 3600.0
    await share.spent(0.06)
    assert clock.slept == [0.04]


def test_a_question_older_than_the_answer_deadline_is_expired() -> None:
    now = time.time()
    assert expired(now - 2.5, 2.0)
    assert not expired(now - 0.5, 2.0)
    assert not expired(None, 2.0)
