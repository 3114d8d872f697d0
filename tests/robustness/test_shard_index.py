"""Issue 39: a shard index naming a system file (``/etc/passwd``, ``../x``) was reported as an IndexError
building the model, after transformers had opened the file. ``models.loading.check_shard_index`` checks the
index transformers will follow before it reads a byte: every shard a file inside the folder, of the index's
kind; else one line and exit 2. A genuinely sharded folder still loads, with the same weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rankcollapse.cli.main import main
from rankcollapse.edge.errors import RankCollapseError
from rankcollapse.models.loading import check_model_folder

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

INDEX = "model.safetensors.index.json"


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sharded")
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=16, num_attention_heads=2,
                                     intermediate_size=16, vocab_size=32, max_position_embeddings=32)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(folder, max_shard_size="4KB")
    assert (folder / INDEX).is_file() and not (folder / "model.safetensors").exists()
    return folder


def _with_map(folder: Path, tmp_path: Path, shard: object) -> Path:
    copy = tmp_path / "m"
    copy.mkdir()
    (copy / "config.json").write_text((folder / "config.json").read_text())
    index = json.loads((folder / INDEX).read_text())
    index["weight_map"] = {k: shard for k in index["weight_map"]}
    (copy / INDEX).write_text(json.dumps(index))
    return copy


@pytest.mark.parametrize(("shard", "words"), [
    ("/etc/passwd", "outside the folder"),
    ("../../../../etc/hostname", "outside the folder"),
    ("weights.bin", "allowed: .safetensors files"),
    ("model-00009-of-00009.safetensors", "not in the folder"),
    (["a", "b"], "outside the folder"),
    ("", "outside the folder"),
])
def test_a_shard_outside_the_folder_or_missing_is_one_line(sharded, tmp_path, shard, words):
    folder = _with_map(sharded, tmp_path, shard)
    with pytest.raises(RankCollapseError, match=words):
        check_model_folder(folder)


def test_a_link_out_of_the_folder_is_refused(sharded, tmp_path):
    folder = _with_map(sharded, tmp_path, "model-00001-of-00001.safetensors")
    outside = tmp_path / "elsewhere.safetensors"
    outside.write_bytes(b"x")
    (folder / "model-00001-of-00001.safetensors").symlink_to(outside)
    with pytest.raises(RankCollapseError, match="a link out of the folder"):
        check_model_folder(folder)


@pytest.mark.parametrize("text", ["{not json", "[]", '{"weight_map": {}}', '{"weight_map": 3}'])
def test_an_unreadable_index_is_one_line(sharded, tmp_path, text):
    folder = _with_map(sharded, tmp_path, "x.safetensors")
    (folder / INDEX).write_text(text)
    with pytest.raises(RankCollapseError, match=INDEX):
        check_model_folder(folder)


def test_the_cli_says_it_in_one_line_and_exit_2(sharded, tmp_path, capsys):
    folder = _with_map(sharded, tmp_path, "/etc/passwd")
    code = main(["analyze", "--model", str(folder), "--corpus", "wikipedia", "--samples", "2",
                 "--tokens", "8", "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "names shard '/etc/passwd', outside the folder" in err[0], err


def test_a_sharded_folder_loads_the_same_weights(sharded):
    from rankcollapse.models.loading import load_model

    check_model_folder(sharded)
    loaded = load_model(str(sharded))
    reference = transformers.BertModel.from_pretrained(sharded)
    ours = dict(loaded.hf_model.named_parameters())
    for name, value in reference.named_parameters():
        assert torch.equal(ours[name], value), name
