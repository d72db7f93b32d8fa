"""The quick tier keeps a case of every fast-tier test (issue 51): the rule, and this session's tests."""
from __future__ import annotations

from typing import Dict, List, Optional

import pytest

from conftest import TIERS, mark_quick_tier


class FakeItem:
    """What mark_quick_tier reads of a pytest item: its node id and markers."""

    def __init__(self, nodeid: str, *markers: str) -> None:
        self.nodeid, self.markers = nodeid, set(markers)

    def get_closest_marker(self, name: str) -> Optional[str]:
        return name if name in self.markers else None

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.markers.add(mark.name)


def _quick(items: List[FakeItem]) -> List[str]:
    mark_quick_tier(items)  # type: ignore[arg-type]
    return [item.nodeid for item in items if "quick" in item.markers]


def test_a_parametrized_test_whose_first_case_is_slow_keeps_its_first_fast_case():
    items = [FakeItem("t.py::test_a[final]", "slow"), FakeItem("t.py::test_a[rp]"), FakeItem("t.py::test_a[ap]"),
             FakeItem("t.py::test_b"), FakeItem("t.py::test_c[x]", "slow")]
    assert _quick(items) == ["t.py::test_a[rp]", "t.py::test_b"]


def test_quick_every_case_keeps_every_fast_case():
    items = [FakeItem("t.py::test_a[1]", "quick_every_case", "slow"), FakeItem("t.py::test_a[2]", "quick_every_case"),
             FakeItem("t.py::test_a[3]", "quick_every_case")]
    assert _quick(items) == ["t.py::test_a[2]", "t.py::test_a[3]"]


def test_every_fast_tier_test_of_this_session_has_a_quick_case(request):
    """Read off the markers this session's collection gave (before -m deselected any)."""
    functions: Dict[str, bool] = {}
    for nodeid, slow, quick in request.config.stash[TIERS]:
        if not slow:
            function = nodeid.split("[", 1)[0]
            functions[function] = functions.get(function, False) or quick
    assert functions, "no fast-tier test collected"
    missing = [f for f, has_quick in functions.items() if not has_quick]
    assert not missing, f"fast-tier tests with no case in the quick tier: {missing}"
