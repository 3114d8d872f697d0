"""Renamed module attributes: the old name serves the new object for one release, with one warning."""

import pytest

from rankcollapse.edge.deprecation import RankCollapseDeprecation
from rankcollapse.experiments.kit import data, plots


@pytest.mark.parametrize(("module", "old", "new"), [(data, "VARIANT_WORDS", "MODE_WORDS"),
                                                     (plots, "variant_rows", "mode_rows")])
def test_an_old_kit_name_is_the_new_object_with_one_warning_naming_it(module, old, new):
    with pytest.warns(RankCollapseDeprecation) as caught:
        got = getattr(module, old)
    assert got is getattr(module, new)
    assert len(caught) == 1 and new in str(caught[0].message) and old in str(caught[0].message)


def test_a_name_never_defined_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        data.no_such_name  # noqa: B018
