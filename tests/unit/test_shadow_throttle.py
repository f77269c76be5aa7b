"""The shadow role's one CPU budget (`shadow.service.Throttle`): the runs under way together fold for at most
their share of the clock, whichever of them did the work, and none waits while nothing is owed."""

from __future__ import annotations

from shadow.service import SLICE_S, Throttle


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


async def test_work_under_a_slice_owes_nothing() -> None:
    clock = Clock()
    throttle = Throttle(0.5, clock, clock.sleep)
    await throttle.turn()
    clock.now += SLICE_S / 2
    throttle.spent()
    await throttle.turn()
    assert clock.slept == []


async def test_a_slice_of_one_run_is_rested_by_every_run() -> None:
    clock = Clock()
    throttle = Throttle(0.25, clock, clock.sleep)
    # Run A folds a record that takes 0.03 s: at a quarter share it owes three times that.
    await throttle.turn()
    clock.now += 0.03
    throttle.spent()
    # Run B, next on the loop, waits out A's rest before its own record.
    await throttle.turn()
    assert clock.slept == [0.09]
    # And A, after B, owes nothing more until another slice is worked.
    clock.now += 0.001
    throttle.spent()
    await throttle.turn()
    assert clock.slept == [0.09]


async def test_the_share_holds_over_many_records() -> None:
    clock = Clock()
    throttle = Throttle(0.5, clock, clock.sleep)
    began = clock.now
    for _ in range(1000):
        await throttle.turn()
        clock.now += 0.002
        throttle.spent()
    await throttle.turn()
    worked = 1000 * 0.002
    assert round(worked / (clock.now - began), 2) == 0.5
