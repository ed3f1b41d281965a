"""A user's own images (``--dataset folder:PATH``): the layout's checks, the decoded images
against PIL read independently, the seeded split, the streaming by DataLoader workers, and
`nas search` / `nas train` on a folder, through the CLI and the library."""

from __future__ import annotations

import gc
import json
import multiprocessing
import os

import numpy as np
import pytest
import torch
from image_folders import BAD, CLASSES, PER_CLASS, pil_pixels, shape, write_bad, write_folder
from PIL import Image

from genlab.cli import main
from genlab.core.data import Batches, Split, imagefolder
from genlab.core.data.imagefolder import folder_data, scan_folder
from genlab.core.errors import ConfigError, DataError
from genlab.nas.data import DATASETS, StepBatches, load_image_data
from genlab.nas.search import SearchConfig, run_search

NB201_ARCH = ("|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+"
              "|avg_pool_3x3~0|none~1|nor_conv_3x3~2|")


@pytest.fixture()
def folder(tmp_path):
    return write_folder(tmp_path / "shapes")


def _truth(files, size, mode, train_files):
    """The images of ``files`` as the tests read them: PIL, resized, standardised by the mean
    and std (per channel) of every training image (all of them: fewer than STATS_IMAGES)."""
    train = torch.from_numpy(np.stack([pil_pixels(f, size, mode) for f in train_files]))
    mean = train.mean(dim=(0, 2, 3)).view(1, -1, 1, 1)
    std = train.std(dim=(0, 2, 3)).view(1, -1, 1, 1)
    x = torch.from_numpy(np.stack([pil_pixels(f, size, mode) for f in files]))
    return (x - mean) / std


def test_scan_lists_every_image_with_its_class_and_skips_hidden_names(folder):
    (folder / ".ipynb_checkpoints").mkdir()  # a hidden folder is no class
    (folder / "circle" / ".AppleDouble.png").write_bytes(b"not an image")  # hidden: skipped
    (folder / "circle" / "notes.txt").write_text("no image suffix")
    (folder / "square" / "more").mkdir()  # images below a class folder belong to it
    Image.fromarray(shape("square", 12, 12)).save(folder / "square" / "more" / "deep.png")
    scan = scan_folder(folder)
    assert scan.classes == CLASSES and scan.channels == 1 and scan.mode == "L"
    assert len(scan.files) == 3 * PER_CLASS + 1
    for path, label in zip(scan.files, scan.labels, strict=True):
        assert f"/{CLASSES[label]}/" in path
    assert str(folder / "square" / "more" / "deep.png") in scan.files


def test_the_registry_names_folders_and_the_loader_reads_them(folder):
    assert imagefolder.NAME in DATASETS  # listed in --dataset's help and error line
    data = load_image_data(f"folder:{folder}", size=8, seed=0)
    assert (data.num_classes, data.in_channels, data.size) == (3, 1, 8)
    with pytest.raises(ConfigError, match="--data-root is not read"):
        load_image_data(f"folder:{folder}", root=folder, size=8)


def test_grey_images_equal_pil_read_independently(folder):
    size = 12
    data = folder_data(folder, size=size, seed=3, workers=1)
    train, test = data.train.images, data.test.images
    want_train = _truth(train.files, size, "L", train.files)
    want_test = _truth(test.files, size, "L", train.files)
    assert train[torch.tensor([0, 2, 5])].shape == (3, 1, size, size)
    assert torch.allclose(train[torch.tensor([0, 2, 5])], want_train[[0, 2, 5]], atol=1e-5)
    assert torch.allclose(train[1], want_train[1], atol=1e-5)
    mask = torch.tensor([r in (0, 2) for r in range(len(train))])
    assert torch.allclose(train[mask], want_train[[0, 2]], atol=1e-5)
    assert torch.allclose(test[:], want_test, atol=1e-5)
    # streamed: the batches of an epoch (DataLoader workers) hold the same pixels and labels
    labels = data.train.labels
    seen = 0
    for x, y in Batches(data.train, 4, seed=1).epoch(0):
        for image, label in zip(x, y, strict=True):
            row = next(r for r in range(len(train)) if torch.allclose(want_train[r], image,
                                                                       atol=1e-5))
            assert labels[row] == label
            seen += 1
    assert seen == len(train)


def test_colour_and_special_modes_read_as_their_kind(tmp_path):
    root = tmp_path / "colour"
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
    rng = np.random.default_rng(0)
    rgb = lambda h, w: (rng.random((h, w, 3)) * 255).astype(np.uint8)  # noqa: E731
    Image.fromarray(rgb(10, 13)).save(root / "a" / "0.png")
    Image.fromarray(rgb(14, 9)).save(root / "a" / "1.jpg")
    Image.fromarray(rgb(11, 11)).convert("RGBA").save(root / "a" / "2.png")
    Image.fromarray(rgb(12, 10)).quantize(8).save(root / "b" / "0.png")  # a colour palette
    Image.fromarray(rgb(9, 15)).save(root / "b" / "1.bmp")
    Image.fromarray(rgb(16, 16)).save(root / "b" / "2.png")
    data = folder_data(root, size=8, seed=0, workers=0)
    assert data.in_channels == 3
    every = [*data.train.images.files, *data.val.images.files, *data.test.images.files]
    got = torch.cat([data.train.images[:], data.val.images[:], data.test.images[:]])
    assert torch.allclose(got, _truth(every, 8, "RGB", data.train.images.files), atol=1e-5)

    grey = tmp_path / "grey"
    for c in ("a", "b"):
        (grey / c).mkdir(parents=True)
        for i in range(2):
            Image.fromarray(shape("circle", 9 + i, 12)).save(grey / c / f"{i}.png")
    deep = (np.arange(12 * 10).reshape(12, 10) * 500).astype(np.uint16)  # up to 59,500
    Image.fromarray(deep).save(grey / "a" / "16bit.png")
    Image.fromarray(shape("cross", 10, 10)).convert("P").save(grey / "b" / "palette.png")
    assert Image.open(grey / "a" / "16bit.png").mode == "I;16"
    data = folder_data(grey, size=8, seed=0, workers=0)
    assert data.in_channels == 1  # 16-bit grey and a grey palette are grey
    every = [*data.train.images.files, *data.val.images.files, *data.test.images.files]
    got = torch.cat([data.train.images[:], data.val.images[:], data.test.images[:]])
    want = _truth(every, 8, "L", data.train.images.files)
    assert torch.allclose(got, want, atol=1e-4)
    deep_pixels = pil_pixels(str(grey / "a" / "16bit.png"), 8, "L")
    assert 0.2 < deep_pixels.mean() < 0.7  # scaled by its range (clipped to 8 bits: all 1)


def test_split_is_seeded_stratified_disjoint_in_the_digits_shares(folder):
    a, b, c = (folder_data(folder, size=8, seed=s) for s in (0, 0, 1))
    parts = [set(p.images.files) for p in (a.train, a.val, a.test)]
    assert [len(p) for p in parts] == [2 * 3, 2 * 3, 1 * 3]  # 40 / 40 / 20 % of 5 per class
    assert len(set.union(*parts)) == 3 * PER_CLASS  # disjoint, nothing left out
    assert [p.images.files for p in (a.train, a.val, a.test)] == \
        [p.images.files for p in (b.train, b.val, b.test)]
    assert a.train.images.files != c.train.images.files
    for split in (a.train, a.val, a.test):
        assert sorted(split.labels.tolist()) == sorted(
            CLASSES.index(f.split("/")[-2]) for f in split.images.files)
        assert set(split.labels.tolist()) == {0, 1, 2}  # every class in every part
    full = a.train_full()
    assert full.images.files == a.train.images.files + a.val.images.files


def test_batches_are_decoded_by_workers_only_when_read(folder, tmp_path, monkeypatch):
    log = tmp_path / "decoded.txt"
    decode = imagefolder._Decoded.__getitem__

    def logged(self, i):
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {self.files[i]}\n")
        return decode(self, i)

    monkeypatch.setattr(imagefolder._Decoded, "__getitem__", logged)
    monkeypatch.setattr(imagefolder, "STATS_IMAGES", 2)
    data = folder_data(folder, size=8, seed=0, workers=1)
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and {ln.split()[0] for ln in lines} == {str(os.getpid())}
    stream = StepBatches(data.train, 2, seed=5)
    x, y = stream.at(0)
    assert x.shape == (2, 1, 8, 8)
    read = [ln.split() for ln in log.read_text().splitlines()[2:]]
    assert read and all(pid != str(os.getpid()) for pid, _ in read)  # a worker decoded them
    # the batch of step 0 and at most the worker's read-ahead (2 batches), not the split
    assert len(read) <= 3 * 2 < len(data.train) + len(data.val) + len(data.test)


def test_step_batches_stream_what_the_same_images_in_memory_give(folder):
    data = folder_data(folder, size=8, seed=2, workers=1)
    images = data.train_full().images
    memory = Split(images[:], data.train_full().labels)
    streamed = StepBatches(data.train_full(), 4, seed=7)
    reference = StepBatches(memory, 4, seed=7)
    streams = []
    torch.manual_seed(0)
    state = torch.get_rng_state()
    for step in (0, 1, 2, 3, 4, 1, 0, 5, 6, 6, 9):  # in order, jumps back and ahead, repeats
        (x, y), (xr, yr) = streamed.at(step), reference.at(step)
        # a stream started anew draws nothing from torch's generator (a resumed search's
        # draws stay those of the run it continues)
        assert torch.equal(torch.get_rng_state(), state)
        assert torch.equal(y, yr) and torch.allclose(x, xr, atol=1e-6), step
        streams.append(streamed._stream)
    # steps in order come from one DataLoader; a jump starts another where it lands
    opened = [k for k in range(1, len(streams)) if streams[k] is not streams[k - 1]]
    assert opened == [5, 6, 7, 10]  # at 1 and 0 (back), at 5 (after 0), at 9 (ahead)


def test_a_dropped_stream_stops_its_workers_without_the_garbage_collector(folder):
    # a stream in a reference cycle is freed by the collector, after the queues that signal its
    # workers are closed: each worker is then waited for 5 s and killed (a search on a folder
    # paid 5 s per stream). Dropped, with the collector off, its workers must end at once.
    data = folder_data(folder, size=8, seed=0, workers=1)
    stream = StepBatches(data.train, 2, seed=5)
    stream.at(0), stream.at(1)
    assert multiprocessing.active_children()  # the stream's DataLoader worker
    gc.collect()
    gc.disable()
    try:
        del stream
        assert not multiprocessing.active_children()
    finally:
        gc.enable()


def test_a_file_that_does_not_decode_is_one_line_naming_it(folder):
    bad = folder / "circle" / "0.png"
    bad.write_bytes(bad.read_bytes()[:60])  # the header opens, the pixels do not decode
    data = folder_data(folder, size=8, seed=0, workers=1)  # checked up front: headers only
    with pytest.raises(DataError) as caught:
        for _ in Batches(data.test, 64).epoch(0):
            pass
        for _ in Batches(data.train_full(), 64).epoch(0):
            pass
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{bad}: cannot decode the image")


def _run(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err


SEARCH = ["--steps", "4", "--size", "8", "--batch-size", "4"]  # 6 train images: 1 step/epoch


def _losses(run):
    rows = (json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines())
    return [(r["step"], r["train_loss"], r["val_loss"]) for r in rows]


def test_a_search_on_a_folder_through_the_cli_equals_the_librarys_resumed_one(
        folder, tmp_path, capsys):
    data = f"folder:{folder}"
    code, _, err = _run(["nas", "search", "--dataset", data, *SEARCH,
                         "--out", str(tmp_path / "cli")], capsys)
    assert code == 0, err
    by_cli = json.loads((tmp_path / "cli" / "summary.json").read_text())
    cfg = SearchConfig(dataset=data, steps=4, size=8, batch_size=4)
    assert run_search(cfg, tmp_path / "library", stop_at=2)["stopped_at"] == 2
    by_library = run_search(cfg, tmp_path / "library", resume=True)  # streams start at step 2
    assert _losses(tmp_path / "library") == _losses(tmp_path / "cli")
    assert len(_losses(tmp_path / "cli")) == 4 and all(
        np.isfinite(loss) for _, loss, _ in _losses(tmp_path / "cli"))
    assert by_library["genotype"] == by_cli["genotype"]


def test_nas_train_on_a_folder(folder, tmp_path, capsys):
    code, _, err = _run(["nas", "train", NB201_ARCH, "--dataset", f"folder:{folder}",
                         "--epochs", "1", "--size", "8", "-C", "4", "--out", str(tmp_path / "t")],
                        capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "t" / "summary.json").read_text())
    assert 0 <= summary["test_acc"] <= 100


@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_bad_folder_is_one_line_and_no_run_folder(kind, tmp_path, capsys):
    root = tmp_path / "data"
    if kind != "missing":
        write_bad(kind, root)
    with pytest.raises(ConfigError, match=BAD[kind].replace("(", r"\(").replace(")", r"\)")):
        scan_folder(root)
    commands = {"search": ["nas", "search", *SEARCH],
                "train": ["nas", "train", NB201_ARCH, "--epochs", "1"],
                "optim": ["optim", "train", "--epochs", "1"]}
    for name, command in commands.items():
        out = tmp_path / name
        code, _, err = _run([*command, "--dataset", f"folder:{root}", "--out", str(out)],
                            capsys)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and BAD[kind] in lines[0], (name, err)
        assert not out.exists(), name
    if kind == "mixed":
        assert "a/0.png is grey" in lines[0] and "b/colour.png colour" in lines[0]

