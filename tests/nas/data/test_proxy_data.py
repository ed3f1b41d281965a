"""Harder digits proxies: the dataset registry, the corruption, 1/f clutter and composites."""

import numpy as np
import pytest
import torch

from genlab.core.data import load_digits_data
from genlab.core.errors import ConfigError
from genlab.nas.data import DATASETS, load_image_data
from genlab.nas.data.clutter import corrupt, on_clutter, pink_noise


def test_registry_names_every_dataset_and_refuses_unknown_ones():
    assert {"digits", "cifar10", "cifar100", "imagenet16", "digits-noisy",
            "digits-clutter"} <= set(DATASETS)
    with pytest.raises(ConfigError, match="digits-clutter"):  # the message lists the names
        load_image_data("mnist")
    with pytest.raises(ConfigError, match="data-root"):
        load_image_data("cifar10")


def test_digits_noisy_keeps_the_digits_split_and_is_fixed_per_seed():
    clean, noisy = load_digits_data(size=16, seed=4), load_image_data("digits-noisy", size=16,
                                                                      seed=4)
    for part in ("train", "val", "test"):
        assert torch.equal(getattr(clean, part).labels, getattr(noisy, part).labels)
        assert getattr(noisy, part).images.shape == getattr(clean, part).images.shape
    again = load_image_data("digits-noisy", size=16, seed=4)
    assert torch.equal(noisy.val.images, again.val.images)
    assert not torch.allclose(noisy.val.images, clean.val.images, atol=0.1)


def test_corrupt_hand_case_occludes_a_square_with_mid_grey():
    x = torch.rand(3, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    out = corrupt(x, torch.Generator().manual_seed(1), noise=0.0, contrast=(1.0, 1.0),
                  occlude=0.25)
    grey = out == 0.5
    assert torch.equal(out[~grey], x[~grey])
    for k in range(3):  # exactly one 2x2 square per image
        rows, cols = torch.nonzero(grey[k, 0], as_tuple=True)
        assert len(rows) == 4 and rows.max() - rows.min() == 1 and cols.max() - cols.min() == 1


def test_pink_noise_has_a_one_over_f_squared_spectrum():
    maps = pink_noise(400, 1, 32, torch.Generator().manual_seed(0)).numpy()[:, 0]
    assert np.allclose(maps.mean(axis=(1, 2)), 0, atol=1e-5)
    assert np.allclose(maps.std(axis=(1, 2)), 1, atol=1e-3)
    power = (np.abs(np.fft.fft2(maps)) ** 2).mean(0)
    f = np.hypot(*np.meshgrid(np.fft.fftfreq(32), np.fft.fftfreq(32), indexing="ij"))
    keep = (f > 0.05) & (f < 0.45)
    slope = np.polyfit(np.log(f[keep]), np.log(power[keep]), 1)[0]
    assert slope == pytest.approx(-2.0, abs=0.1)


def test_on_clutter_paints_the_figure_in_its_colour_over_grey():
    figures = torch.zeros(2, 1, 4, 4)
    figures[:, :, 1:3, 1:3] = 1.0
    out = on_clutter(figures, torch.Generator().manual_seed(0), size=8, figure_fraction=0.5,
                     clutter=0.0, noise=0.0)
    assert out.shape == (2, 3, 8, 8)
    for k in range(2):
        flat = out[k].reshape(3, -1)
        inside = (flat - 0.5).abs().sum(0) > 1e-6
        assert int(inside.sum()) == 4  # the 2x2 core of the figure, resized to 4x4 of 8x8
        colour = flat[:, inside][:, 0]
        assert torch.all(((colour - 0.5).abs() >= 0.25 - 1e-6) & ((colour - 0.5).abs() <= 0.5))
        assert torch.all(torch.sign(colour - 0.5) == torch.sign(colour[0] - 0.5))  # polarity


def test_digits_clutter_shapes_labels_and_reproducibility():
    d = load_image_data("digits-clutter", size=16, seed=2)
    clean = load_digits_data(seed=2)
    assert d.in_channels == 3 and d.train.images.shape[1:] == (3, 16, 16)
    assert len(d.train) == 3 * len(clean.train) and len(d.test) == len(clean.test)
    assert torch.equal(d.train.labels, clean.train.labels.repeat(3))
    assert torch.equal(d.val.images, load_image_data("digits-clutter", size=16, seed=2).val.images)


@pytest.mark.parametrize("name", ["digits-noisy", "digits-clutter"])
def test_search_and_retraining_run_on_the_harder_proxies(tmp_path, name):
    from genlab.nas.retrain import RetrainConfig, retrain
    from genlab.nas.search import SearchConfig, run_search

    s = run_search(SearchConfig(dataset=name, size=16, steps=11, channels=2, hessian_points=0,
                                reg="none"), tmp_path / "s", progress_bar=False)
    r = retrain(RetrainConfig(arch=s["genotype"], dataset=name, size=16, channels=2, epochs=1,
                              eval_on="val"), tmp_path / "r", progress_bar=False)
    assert 0 <= r["val_acc"] <= 100


def test_shapes_splits_are_the_digits_shares_and_the_size_is_its_own():
    from genlab.nas.data import default_size
    from genlab.nas.retrain import RetrainConfig
    from genlab.nas.search import SearchConfig

    d = load_image_data("shapes", size=16, seed=1)
    assert (len(d.train), len(d.val), len(d.test)) == (2000, 2000, 1000)
    assert d.in_channels == 3 and d.num_classes == 10 and d.train.images.shape[1:] == (3, 16, 16)
    assert torch.equal(torch.bincount(d.test.labels), torch.full((10,), 100))
    assert default_size("shapes") == 32 and default_size("digits") is None
    assert SearchConfig(dataset="shapes").resolved().size == 32
    assert SearchConfig(dataset="shapes", size=16).resolved().size == 16
    assert RetrainConfig(arch="|none~0|+|none~0|none~1|+|none~0|none~1|none~2|",
                         dataset="shapes").resolved().size == 32


def test_shapes_through_search_train_and_bench(tmp_path):
    from genlab.nas.bench import BenchConfig, run_bench
    from genlab.nas.retrain import RetrainConfig, retrain
    from genlab.nas.search import SearchConfig, run_search

    s = run_search(SearchConfig(dataset="shapes", size=12, steps=3, channels=2, batch_size=16,
                                hessian_points=0), tmp_path / "s", progress_bar=False)
    r = retrain(RetrainConfig(arch=s["genotype"], dataset="shapes", size=12, channels=2,
                              epochs=1, batch_size=256, eval_on="val"), tmp_path / "r",
                progress_bar=False)
    assert 0 <= r["val_acc"] <= 100
    b = run_bench(BenchConfig(regs=["none"], seeds=[0], search=SearchConfig(
        dataset="shapes", size=12, steps=2, channels=2, batch_size=16, hessian_points=0),
        retrain_epochs=1, retrain_channels=2, random_archs=False), tmp_path / "b")
    assert b
