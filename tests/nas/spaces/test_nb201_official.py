"""The official NATS-Bench topology file and directory and the NAS-Bench-201 v1.1 .pth as
accuracy tables: tiny ones (3 architectures) built here with the packages' own classes and
writers, read back by the packages' own APIs, by NB201Table and by `genlab nas ...`."""

import bz2
import csv
import sys

import pytest
import torch
from nas_reference import run_cli

from genlab.core.errors import ConfigError
from genlab.nas.spaces.nb201.genotype import Genotype
from genlab.nas.spaces.nb201.official import write_csv
from genlab.nas.spaces.nb201.table import NB201Table

nats_bench = pytest.importorskip("nats_bench")  # the nb201 extra (make installs it)
nas_201_api = pytest.importorskip("nas_201_api")

BEST = ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+"
        "|skip_connect~0|nor_conv_3x3~1|nor_conv_1x1~2|")
NONE = Genotype.from_edges(["none"] * 6).to_string()
POOL = Genotype.from_edges(["avg_pool_3x3"] * 6).to_string()
# the independent truth: 200-epoch test accuracies (%) as genlab reports them
TRUTH = {BEST: {"cifar10": 94.37, "cifar100": 73.25, "imagenet16": 46.75},
         NONE: {"cifar10": 10.0, "cifar100": 1.0, "imagenet16": 0.83},
         POOL: {"cifar10": 80.5, "cifar100": 50.25, "imagenet16": 20.5}}
ARCHS = list(TRUTH)
SEEDS = (777, 888)  # two trials an architecture, truth -/+ SPREAD: their mean is the truth
SPREAD = 0.25
OFFICIAL = {"cifar10": "cifar10", "cifar100": "cifar100", "imagenet16": "ImageNet16-120"}
# official dataset -> (genlab's dataset whose truth it holds, its evaluation sets)
EVAL_SETS = {"cifar10-valid": ("cifar10", ("x-valid", "ori-test")),
             "cifar10": ("cifar10", ("ori-test",)),
             "cifar100": ("cifar100", ("x-valid", "x-test", "ori-test")),
             "ImageNet16-120": ("imagenet16", ("x-valid", "x-test", "ori-test"))}
# the test set genlab reads; the other sets (and the 12-epoch runs, and CIFAR-10 trained on
# train only) hold other numbers, so reading any of them shows
TEST_SET = {"cifar10": "ori-test", "cifar100": "x-test", "ImageNet16-120": "x-test"}


def _final(dataset, setname, truth, epochs):
    acc = truth
    if dataset == "cifar10-valid" or setname != TEST_SET.get(dataset):
        acc -= 3.0
    if epochs != 200:
        acc -= 20.0
    return acc


def _arch_results(pkg, index, arch, epochs):
    """The package's ArchResults of one architecture, every set at every epoch, as saved."""
    res = pkg.ArchResults(index, arch)
    for dataset, (ours, sets) in EVAL_SETS.items():
        truth = TRUTH[arch][ours]
        for k, seed in enumerate(SEEDS):
            shift = (2 * k - 1) * SPREAD
            per_epoch = {e: 0.1 * e for e in range(epochs)}
            r = pkg.ResultsCount(dataset, None, per_epoch, per_epoch, 0.5, 40.0,
                                 {"name": "infer.tiny", "channel": 16, "num_cells": 5,
                                  "arch_str": arch, "class_num": 10}, seed, epochs, [0.01])
            r.update_train_info(per_epoch, per_epoch, per_epoch, {e: 1.0 for e in range(epochs)})
            last = epochs - 1
            accs = {f"{s}@{e}": (_final(dataset, s, truth, epochs) + shift
                                 - 0.01 * (last - e)) for s in sets for e in range(epochs)}
            r.update_eval(accs, {key: 1.0 for key in accs}, {key: 0.5 for key in accs})
            res.update(dataset, seed, r)
    return res.state_dict()


def _nats_infos(index, arch):
    return {"12": _arch_results(nats_bench, index, arch, 12),
            "200": _arch_results(nats_bench, index, arch, 200)}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{'nats-file', 'nats-dir', 'nb201'}: the three official layouts, written once."""
    root = tmp_path_factory.mktemp("official")
    infos = {i: _nats_infos(i, a) for i, a in enumerate(ARCHS)}
    # one file: the dict NATStopology loads without fast mode, bz2-pickled by nats_bench
    nats_bench.pickle_save({"meta_archs": ARCHS, "arch2infos": infos,
                            "evaluated_indexes": set(infos)},
                           root / "NATS-tss-v1_0-3ffb9-full.pickle")
    # the fast-mode directory: meta.pickle.pbz2 and <index>.pickle.pbz2 per architecture
    folder = root / "NATS-tss-v1_0-3ffb9-simple"
    folder.mkdir()
    nats_bench.pickle_save({"meta_archs": ARCHS}, folder / "meta.pickle")
    for i, info in infos.items():
        nats_bench.pickle_save(info, folder / f"{i:06d}.pickle")
    # NAS-Bench-201 v1.1: a torch.save'd dict, 'less' (12 epochs) and 'full' (200) per arch
    nb201 = root / "NAS-Bench-201-v1_1-096897.pth"
    torch.save({"meta_archs": ARCHS, "evaluated_indexes": set(range(len(ARCHS))),
                "arch2infos": {i: {"less": _arch_results(nas_201_api, i, a, 12),
                                   "full": _arch_results(nas_201_api, i, a, 200)}
                               for i, a in enumerate(ARCHS)}}, nb201)
    return {"nats-file": root / "NATS-tss-v1_0-3ffb9-full.pickle.pbz2", "nats-dir": folder,
            "nb201": nb201}


def _official_api(kind, path):
    if kind == "nb201":
        return nas_201_api.NASBench201API(str(path), verbose=False)
    return nats_bench.create(str(path), "tss", fast_mode=kind == "nats-dir", verbose=False)


KINDS = ("nats-file", "nats-dir", "nb201")


@pytest.mark.parametrize("kind", KINDS)
def test_lookup_equals_the_truth_and_the_official_api(kind, files):
    table = NB201Table.load(files[kind])
    api = _official_api(kind, files[kind])
    assert len(table) == len(ARCHS)
    for arch in ARCHS:
        acc = table.lookup(arch)
        assert acc == pytest.approx(TRUTH[arch], abs=1e-9)
        index = api.query_index_by_arch(arch)
        official = {ds: api.get_more_info(index, name, hp="200", is_random=False)
                    ["test-accuracy"] for ds, name in OFFICIAL.items()}
        assert acc == official
    assert table.best("cifar10") == (BEST, pytest.approx(94.37))
    assert NB201Table.load(files[kind]) is table  # cached like the CSV


@pytest.mark.parametrize("kind", KINDS)
def test_cli_lookup_and_convert(kind, files, tmp_path, capsys):
    code, out, err = run_cli(["nas", "lookup", BEST, "--nb201-table", files[kind]], capsys)
    assert code == 0, err
    assert out.startswith("94.37% / 73.25% / 46.75%  (CIFAR-10 / CIFAR-100 / ImageNet16-120)")
    csv_path = tmp_path / "tables" / "nb201.csv"
    code, out, err = run_cli(["nas", "table", "convert", files[kind], "--out", csv_path], capsys)
    assert code == 0, err
    assert out.strip() == f"3 architectures -> {csv_path}"
    assert [p.name for p in csv_path.parent.iterdir()] == ["nb201.csv"]  # no temporary left
    with csv_path.open(newline="") as fh:
        assert next(csv.reader(fh))[-1] == "ArchitectureString"
    source, converted = NB201Table.load(files[kind]), NB201Table.load(csv_path)
    assert converted.rows == source.rows
    assert all(converted.lookup(a) == source.lookup(a) for a in ARCHS)
    code, out, err = run_cli(["nas", "lookup", POOL, "--nb201-table", csv_path], capsys)
    assert code == 0 and out.startswith("80.50% / 50.25% / 20.50%"), err


def test_write_csv_round_trip_and_existing_csv_convert(tmp_path, capsys):
    rows = {a: {ds: v + 1e-13 for ds, v in acc.items()} for a, acc in TRUTH.items()}
    first = write_csv(rows, tmp_path / "a.csv")
    assert NB201Table.load(first).rows == rows  # floats written exactly
    code, out, err = run_cli(["nas", "table", "convert", first, "--out", tmp_path / "b.csv"],
                             capsys)
    assert code == 0, err
    assert NB201Table.load(tmp_path / "b.csv").rows == rows


def _bad_sources(root):
    """name -> (a path that is no table, a word the error line holds beside the path)."""
    root.mkdir()
    (root / "junk.bin").write_bytes(b"\xff\x00\x13 not a table")
    (root / "empty-dir").mkdir()
    nats_bench.pickle_save([1, 2, 3], root / "list.pickle")
    nats_bench.pickle_save({"meta_archs": ["64:64:64:64:64"], "arch2infos": {},
                            "evaluated_indexes": set()}, root / "sss.pickle")
    (root / "text.pickle.pbz2").write_bytes(bz2.compress(b"hello, not a pickle"))
    torch.save(torch.zeros(3), root / "tensor.pth")
    torch.save({"meta_archs": [BEST], "arch2infos": {}, "evaluated_indexes": []},
               root / "empty.pth")
    return {"missing": (root / "absent.pth", "does not exist"),
            "not-any-format": (root / "junk.bin", "UTF-8"),
            "dir-without-meta": (root / "empty-dir", "meta.pickle.pbz2"),
            "pickle-of-a-list": (root / "list.pickle.pbz2", "nats_bench cannot read it"),
            "size-benchmark": (root / "sss.pickle.pbz2", "not an NB201 cell"),
            "bz2-not-pickle": (root / "text.pickle.pbz2", "nats_bench cannot read it"),
            "pth-of-a-tensor": (root / "tensor.pth", "nas-bench-201 cannot read it"),
            "pth-without-results": (root / "empty.pth", "no 200-epoch test accuracy")}


BAD = ("missing", "not-any-format", "dir-without-meta", "pickle-of-a-list", "size-benchmark",
       "bz2-not-pickle", "pth-of-a-tensor", "pth-without-results")


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    return _bad_sources(tmp_path_factory.mktemp("bad") / "src")


@pytest.mark.parametrize("name", BAD)
@pytest.mark.parametrize("command", ["convert", "lookup"])
def test_bad_input_is_one_line_naming_the_file(name, command, bad, tmp_path, capsys):
    path, word = bad[name]
    out = tmp_path / "out" / "t.csv"
    argv = (["nas", "table", "convert", path, "--out", out] if command == "convert"
            else ["nas", "lookup", BEST, "--nb201-table", path])
    code, stdout, err = run_cli(argv, capsys)
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("genlab: "), err
    assert str(path) in lines[0] and word in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_convert_to_a_bad_out_is_one_line(files, tmp_path, capsys):
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "a-file").write_text("x")
    for out in (tmp_path / "a-dir", tmp_path / "a-file" / "t.csv"):
        code, _, err = run_cli(["nas", "table", "convert", files["nb201"], "--out", out], capsys)
        assert code == 2 and len(err.splitlines()) == 1 and str(out) in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a-dir", "a-file"]


def test_missing_package_names_the_extra(files, monkeypatch, tmp_path, capsys):
    for kind, module in (("nats-dir", "nats_bench"), ("nb201", "nas_201_api")):
        monkeypatch.setitem(sys.modules, module, None)  # import fails
        NB201Table._cache.clear()
        with pytest.raises(ConfigError, match=r"pip install 'genlab\[nb201\]'"):
            NB201Table.load(files[kind])
        code, _, err = run_cli(["nas", "table", "convert", files[kind], "--out",
                                tmp_path / "t.csv"], capsys)
        assert code == 2 and "genlab[nb201]" in err and str(files[kind]) in err
        assert not (tmp_path / "t.csv").exists()
    NB201Table._cache.clear()
