"""Every scenario file (tests/scenarios) through the pure folds: answers and alerts as the file says."""

from __future__ import annotations

import pytest

from tests.harness import Scenario, check, run, scenarios


@pytest.mark.parametrize("scenario", scenarios(), ids=lambda s: s.name)
def test_scenario(scenario: Scenario) -> None:
    assert check(scenario, run(scenario)) == []
