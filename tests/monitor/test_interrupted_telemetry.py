"""A training's telemetry is never lost to the next Monitor (issue 39, data loss (a)): a Monitor started
on the ``out=`` of an interrupted training (kill -9, a crash, out of memory: the natural
``resume_from_checkpoint=True`` set-up) used to delete the earlier ``metrics.partial.csv`` (the steps
from the initialisation on) and publish the rest as complete. Telemetry cannot be recomputed: that folder
is refused in one line, and its rows stay."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rankcollapse.edge.errors import RankCollapseError

KILLED = textwrap.dedent("""
    import os, sys, torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from rankcollapse.monitor import Monitor
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=50)).eval()
    monitor = Monitor(every=1, out=sys.argv[1])
    ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0))
    for _ in range(4):
        monitor.step(model, ids)
    sys.stdout.flush()
    os._exit(9)  # killed mid-training: close() never ran
""")


def test_a_monitor_refuses_the_folder_of_an_interrupted_training_and_keeps_its_rows(tmp_path):
    out = tmp_path / "telemetry"
    done = subprocess.run([sys.executable, "-c", KILLED, str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 9, done.stderr
    partial = out / "metrics.partial.csv"
    rows = partial.read_text().splitlines()
    assert len(rows) > 4  # the header and the rows of steps 1-4

    from rankcollapse.monitor import Monitor

    with pytest.raises(RankCollapseError, match=r"interrupted monitor run .*cannot be measured again") as err:
        Monitor(every=1, out=str(out))
    assert "\n" not in str(err.value)
    assert partial.read_text().splitlines() == rows  # nothing removed
    Monitor(every=1, out=str(tmp_path / "elsewhere"))  # another folder is fine
