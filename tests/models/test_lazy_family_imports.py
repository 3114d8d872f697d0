"""Loading a model imports the modeling module of its own family only (issue 42: ``_model_class``
imported ``modeling_t5`` to load a BERT). Checked in a fresh process; what it costs in seconds is the
start-up benchmark's (``benchmarks/bench_startup.py``), never a timed test."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_PROBE = """
import json, sys
from rankcollapse.models import load_model
load_model(sys.argv[1], "float32")
print(json.dumps(sorted(m for m in sys.modules if m.startswith("transformers.models.") and ".modeling_" in m
                        and not m.startswith("transformers.models.auto."))))
"""


@pytest.mark.parametrize(("name", "family"),
                         [("tiny:bert", "bert"), ("tiny:gpt2", "gpt2"), ("tiny:t5", "t5")])
def test_a_model_loads_with_its_own_familys_modeling_module_only(name: str, family: str) -> None:
    proc = subprocess.run([sys.executable, "-c", _PROBE, name], capture_output=True, text=True, timeout=300,
                          env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = json.loads(proc.stdout.strip().splitlines()[-1])
    assert modules == [f"transformers.models.{family}.modeling_{family}"], modules
