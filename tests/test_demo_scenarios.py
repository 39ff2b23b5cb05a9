"""`make demo`: every scenario it shows works with diffusers-patched and does something else on upstream."""

import pytest

from tests.support.scenarios import SCENARIOS


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_demo_scenario_works_patched_and_differs_from_upstream(scenario_outcomes, name):
    upstream, patched = scenario_outcomes[False][name], scenario_outcomes[True][name]
    assert patched.ok, patched.result
    assert upstream.result != patched.result
