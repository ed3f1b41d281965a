import pickle

import numpy as np
import pytest
import torch

from genlab.core.data import (
    Batches,
    augment_images,
    load_cifar,
    load_digits_data,
    safe_unpickle,
    stratified_split,
)
from genlab.core.errors import DataError
from genlab.core.seeding import make_generator


def test_digits_split_sizes_disjoint_and_seeded():
    d = load_digits_data(seed=0)
    assert (len(d.train), len(d.val), len(d.test)) == (719, 718, 360) or \
        len(d.train) + len(d.val) + len(d.test) == 1797
    assert d.train.images.shape[1:] == (1, 8, 8) and d.num_classes == 10
    again = load_digits_data(seed=0)
    assert torch.equal(d.val.images, again.val.images)
    assert load_digits_data(size=16).train.images.shape[-1] == 16


def test_stratified_split_partitions_indices():
    labels = np.repeat(np.arange(4), 25)
    parts = stratified_split(labels, (0.4, 0.4, 0.2), seed=1)
    joined = np.sort(np.concatenate(parts))
    assert np.array_equal(joined, np.arange(100))
    assert all(np.bincount(labels[parts[2]]).tolist() == [5, 5, 5, 5] for _ in [0])


def _write_cifar10(folder, n=4):
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                 "data_batch_5", "test_batch"]:
        batch = {b"data": rng.integers(0, 255, (n, 3072), dtype=np.uint8),
                 b"labels": list(rng.integers(0, 10, n)), b"batch_label": b"x"}
        with open(folder / name, "wb") as fh:
            pickle.dump(batch, fh)


def test_cifar_reader_on_real_format(tmp_path):
    _write_cifar10(tmp_path / "cifar-10-batches-py")
    data = load_cifar("cifar10", tmp_path, val_fraction=0.5)
    assert data.test.images.shape == (4, 3, 32, 32)
    assert len(data.train) + len(data.val) == 20


class _Evil:
    def __reduce__(self):
        import os
        return (os.system, ("echo pwned",))


def test_restricted_unpickler_refuses_objects(tmp_path):
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({"data": _Evil()}))
    with pytest.raises(DataError, match="forbidden"):
        safe_unpickle(path)
    with pytest.raises(DataError, match="no folder"):
        load_cifar("cifar10", tmp_path)


def test_batches_deterministic_per_epoch():
    d = load_digits_data()
    b = Batches(d.train, 64, seed=5)
    first = [y for _, y in b.epoch(3)]
    second = [y for _, y in b.epoch(3)]
    assert all(torch.equal(a, c) for a, c in zip(first, second, strict=True))
    assert not torch.equal(first[0], next(iter(b.epoch(4)))[1])


def test_augment_keeps_shape_and_is_reproducible():
    x = torch.randn(8, 1, 8, 8)
    a = augment_images(x, make_generator(0, 1))
    b = augment_images(x, make_generator(0, 1))
    assert a.shape == x.shape and torch.equal(a, b) and not torch.equal(a, x)


def test_cifar_data_keeps_what_prediction_needs(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    _write_cifar10(folder, n=8)
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
             "truck"]
    with open(folder / "batches.meta", "wb") as fh:  # the real file's layout
        pickle.dump({b"label_names": [n.encode() for n in names], b"num_vis": 3072}, fh)
    data = load_cifar("cifar10", tmp_path, val_fraction=0.5)
    facts = data.inference
    assert facts["classes"] == names and facts["mode"] == "RGB" and facts["size"] == 32
    # the facts undo the standardisation: pixels / 255 of a test image come back
    batch = pickle.loads((folder / "test_batch").read_bytes())
    pixels = np.asarray(batch[b"data"][0], np.float32).reshape(3, 32, 32) / 255
    mean = np.asarray(facts["mean"], np.float32).reshape(3, 1, 1)
    std = np.asarray(facts["std"], np.float32).reshape(3, 1, 1)
    assert np.allclose(data.test.images[0].numpy() * std + mean, pixels, atol=1e-5)
    (folder / "batches.meta").unlink()  # without the meta file: the labels' numbers
    assert load_cifar("cifar10", tmp_path).inference["classes"] == [str(i) for i in range(10)]
