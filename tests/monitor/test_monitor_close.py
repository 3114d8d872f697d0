"""How a Monitor ends (issue 39): a failed write at ``close()`` never removes the rows already on disk
(data loss (b): ``metrics.parquet`` on a full disk dropped the staging folder with ``metrics.csv`` in it,
and ``close()`` returned that path), and a ``with Monitor(...)`` block that raises is an interrupted
training, never published as complete (finished-looking: ``__exit__`` closed whatever the exception)."""

from __future__ import annotations

import errno

import pandas as pd
import pytest
import torch

from rankcollapse.edge.folder import is_complete, read_marker
from rankcollapse.monitor import Monitor


def tiny_model():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=50, n_positions=16, bos_token_id=0,
                        eos_token_id=0)
    return GPT2LMHeadModel(config).eval()


IDS = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0))


def test_a_failed_write_at_close_keeps_the_rows_on_disk_and_returns_no_path_that_is_not_there(
    tmp_path, monkeypatch, capsys
):
    pytest.importorskip("pyarrow")
    model, out = tiny_model(), tmp_path / "telemetry"
    monitor = Monitor(every=1, out=str(out))
    for _ in range(3):
        monitor.step(model, IDS)

    def full_disk(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full_disk)
    written = monitor.close()
    assert all(path.exists() for path in written) and written == []
    kept = pd.read_csv(out / "metrics.partial.csv")  # every row measured, under the partial name
    assert sorted(kept["step"].unique()) == [1, 2, 3] and len(kept) == len(monitor.rows)
    assert not (out / "metrics.csv").exists() and not is_complete(out)
    assert read_marker(out)["scratch"] == ["metrics.partial.csv"]  # the next Monitor there refuses
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ENOSPC" in err[0] and "metrics.partial.csv" in err[0]


def test_a_with_block_that_raises_is_an_interrupted_training_never_published_as_complete(tmp_path):
    model, out = tiny_model(), tmp_path / "telemetry"
    with pytest.raises(RuntimeError, match="loss is nan"):
        with Monitor(every=1, out=str(out)) as monitor:
            for step in range(3):
                monitor.step(model, IDS)
                if step == 1:
                    raise RuntimeError("loss is nan")
    assert not (out / "metrics.csv").exists() and not is_complete(out)
    kept = pd.read_csv(out / "metrics.partial.csv")
    assert sorted(kept["step"].unique()) == [1, 2]
    assert not (out / ".lock").exists()  # the lock is let go: a notebook may go on elsewhere

    with Monitor(every=1, out=str(tmp_path / "finished")) as monitor:  # the control: a finished block
        monitor.step(model, IDS)
    assert is_complete(tmp_path / "finished") and (tmp_path / "finished" / "metrics.csv").is_file()


def test_a_second_monitor_on_a_folder_an_unclosed_one_holds_says_so_in_pythons_words(tmp_path):
    from rankcollapse.edge.errors import RankCollapseError

    model, out = tiny_model(), str(tmp_path / "telemetry")
    first = Monitor(every=1, out=out)
    first.step(model, IDS)  # a notebook cell run once: never closed
    with pytest.raises(RankCollapseError) as err:  # the cell run again: one line, in the API's words
        Monitor(every=1, out=out)
    line = str(err.value)
    assert "in use by process" in line and "close() the earlier writer" in line, line
    assert "--wait" not in line and "--out" not in line and "interrupted" not in line  # the API has neither
    first.close()
    assert is_complete(tmp_path / "telemetry")
