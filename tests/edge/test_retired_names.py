"""Module names and kit attributes 0.2.0 retired (their one-release aliases removed): importing or
reading one is Python's own one-line error, and each new home is there."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

#: Old module -> the modules that hold its names now.
MOVED = {
    **{f"rankcollapse.{name}": (f"rankcollapse.edge.{name}",)
       for name in ("errors", "inputs", "validate", "runtime", "progress")},
    "rankcollapse.deprecation": (),
    "rankcollapse.io": ("rankcollapse.edge.atomic", "rankcollapse.edge.folder", "rankcollapse.edge.runs",
                        "rankcollapse.edge.provenance"),
    **{f"rankcollapse.experiments.engine.{name}": (f"rankcollapse.experiments.contract.{name}",)
       for name in ("verdicts", "story")},
}


def test_an_old_module_name_is_not_found_and_its_new_home_imports() -> None:
    """In a fresh interpreter (the module cache would hide an import): each old name is a
    ModuleNotFoundError naming it, with no warning first; ``rankcollapse.edge.deprecation`` is gone."""
    code = (
        "import importlib, warnings\n"
        "warnings.simplefilter('error')\n"
        "import rankcollapse\n"
        f"for old in {[*sorted(MOVED), 'rankcollapse.edge.deprecation']!r}:\n"
        "    try:\n"
        "        importlib.import_module(old)\n"
        "    except ModuleNotFoundError as err:\n"
        "        assert str(err) == f\"No module named '{old}'\", err\n"
        "    else:\n"
        "        raise SystemExit(f'{old} still imports')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    for homes in MOVED.values():
        for home in homes:
            importlib.import_module(home)


@pytest.mark.parametrize(("module", "old", "new"), [("data", "VARIANT_WORDS", "MODE_WORDS"),
                                                     ("plots", "variant_rows", "mode_rows")])
def test_an_old_kit_name_is_an_attribute_error_and_the_new_one_is_there(module: str, old: str,
                                                                        new: str) -> None:
    kit = importlib.import_module(f"rankcollapse.experiments.kit.{module}")
    with pytest.raises(AttributeError, match=f"has no attribute '{old}'") as info:
        getattr(kit, old)
    assert "\n" not in str(info.value)
    assert getattr(kit, new) is not None
