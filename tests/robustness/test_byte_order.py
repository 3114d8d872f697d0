"""A ``.npy`` file in the other byte order is read as its values (issue 39, tracebacks): big-endian pixel
values were a ValueError traceback from torch ("byte order different from the native byte order"). The
one reader (``edge.inputs.read_npy``) gives every array in the machine's order."""

from __future__ import annotations

import numpy as np

from rankcollapse.cli.main import main
from rankcollapse.edge.inputs import read_npy


def test_a_big_endian_npy_reads_as_its_values_in_native_order(tmp_path):
    values = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7
    np.save(tmp_path / "be.npy", values.astype(">f8"))
    got = read_npy(tmp_path / "be.npy", "pixel values")
    assert got.dtype.isnative and np.array_equal(got, values)


def test_analyze_reads_big_endian_pixel_values_as_the_same_images(tmp_path, capsys):
    from rankcollapse.models.images import ImageGeometry, random_pixels

    px = random_pixels(ImageGeometry(3, 32, 32, 8, 8), 2, seed=3).numpy()
    np.save(tmp_path / "le.npy", px.astype("<f4"))
    np.save(tmp_path / "be.npy", px.astype(">f4"))
    for order in ("le", "be"):
        code = main(["analyze", "--model", "tiny:vit", "--samples", "2", "--metrics", "mu,mu_rel",
                     "--no-progress", "--out", str(tmp_path / order), "--pixel-values",
                     str(tmp_path / f"{order}.npy")])
        assert code == 0, capsys.readouterr().err
    assert (tmp_path / "be" / "metrics.csv").read_bytes() == (tmp_path / "le" / "metrics.csv").read_bytes()
