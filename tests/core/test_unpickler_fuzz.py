"""The restricted CIFAR unpickler against malicious pickles (hypothesis).

Payloads are built opcode by opcode: a callable named by GLOBAL, STACK_GLOBAL or INST
(dangerous ones, allowed ones with hostile arguments, and random names), called through
REDUCE, NEWOBJ, OBJ or BUILD, alone or nested inside a batch-like dict. Every payload,
if executed, creates a sentinel file; the property is that the file never appears and
that the reader answers with a dict or a DataError, nothing else. A second property
mutates a genuine batch byte by byte.
"""

import pickle
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genlab.core.data import safe_unpickle
from genlab.core.errors import DataError

WORK = Path(tempfile.mkdtemp(prefix="genlab-fuzz-"))
SENTINEL = WORK / "executed"
PAYLOAD_FILE = WORK / "batch"

DANGEROUS = [
    ("os", "system"), ("posix", "system"), ("builtins", "exec"), ("builtins", "eval"),
    ("builtins", "__import__"), ("builtins", "getattr"), ("builtins", "open"),
    ("subprocess", "check_call"), ("subprocess", "Popen"), ("pickle", "loads"),
    ("shutil", "rmtree"), ("io", "open"), ("pathlib", "Path"), ("numpy", "load"),
    ("numpy.lib.npyio", "load"), ("torch", "load"), ("runpy", "run_path"),
    ("code", "InteractiveInterpreter"), ("ctypes", "CDLL"), ("sys", "exit"),
    ("__builtin__", "eval"), ("copyreg", "_reconstructor"), ("types", "FunctionType"),
]
ALLOWED = [("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
           ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar")]
ARGUMENTS = [
    f"open({str(SENTINEL)!r}, 'w').write('x')",
    f"touch {SENTINEL}",
    str(SENTINEL),
    f"__import__('pathlib').Path({str(SENTINEL)!r}).touch()",
]
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,20}", fullmatch=True)
targets = st.one_of(st.sampled_from(DANGEROUS), st.sampled_from(ALLOWED), st.tuples(names, names))


@pytest.fixture(scope="module", autouse=True)
def _remove_work_folder():
    yield
    shutil.rmtree(WORK, ignore_errors=True)


def _text(s: str) -> bytes:
    raw = s.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw  # BINUNICODE


def _callable(kind: str, module: str, name: str) -> bytes:
    if kind == "global":
        return b"c" + module.encode() + b"\n" + name.encode() + b"\n"
    return _text(module) + _text(name) + b"\x93"  # STACK_GLOBAL


def build(module: str, name: str, arg: str, call: str, head: str, nested: bool,
          protocol: bytes) -> bytes:
    """A pickle that calls module.name(arg) through ``call``, optionally inside a dict."""
    argument = _text(arg)
    if call == "inst":
        body = b"(" + argument + b"i" + module.encode() + b"\n" + name.encode() + b"\n"
    elif call == "obj":
        body = b"(" + _callable(head, module, name) + argument + b"o"
    else:
        target = _callable(head, module, name)
        args = b"(" + argument + b"t"
        body = {"reduce": target + args + b"R", "newobj": target + args + b"\x81",
                "build": target + b"}" + _text("__setstate__") + argument + b"s" + b"b"}[call]
    if nested:  # hide it inside a batch-like dict
        body = b"}(" + _text("labels") + b"]" + _text("data") + body + b"u"
    return protocol + body + b"."


@st.composite
def payloads(draw) -> tuple[bytes, bool]:
    """(pickle, whether its callable is one of DANGEROUS)."""
    module, name = draw(targets)
    data = build(module, name, draw(st.sampled_from(ARGUMENTS)),
                 draw(st.sampled_from(["reduce", "newobj", "obj", "inst", "build"])),
                 draw(st.sampled_from(["global", "stack"])), draw(st.booleans()),
                 draw(st.sampled_from([b"", b"\x80\x02", b"\x80\x04", b"\x80\x05"])))
    return data, (module, name) in DANGEROUS


def test_the_payloads_are_live_for_an_unrestricted_unpickler():
    """The fuzzer's payloads do execute under pickle.loads: the property below can fail."""
    import itertools

    for call, head, nested in itertools.product(["reduce", "newobj", "obj", "inst"],
                                                ["global", "stack"], [False, True]):
        if call == "newobj":  # NEWOBJ calls cls.__new__(cls, *args): a class is needed
            continue
        pickle.loads(build("builtins", "exec", ARGUMENTS[0], call, head, nested, b"\x80\x04"))
        assert SENTINEL.exists(), (call, head, nested)
        SENTINEL.unlink()
        assert isinstance(_read(build("builtins", "exec", ARGUMENTS[0], call, head, nested,
                                      b"\x80\x04")), DataError)
        assert not SENTINEL.exists()


def _read(data: bytes):
    PAYLOAD_FILE.write_bytes(data)
    try:
        return safe_unpickle(PAYLOAD_FILE)
    except DataError as exc:
        return exc


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(payloads())
def test_malicious_pickles_are_refused_never_executed(payload):
    data, dangerous = payload
    result = _read(data)
    assert not SENTINEL.exists(), data
    assert isinstance(result, (dict, DataError)), (type(result), data)
    if dangerous:
        assert isinstance(result, DataError), data


def _genuine_batch() -> bytes:
    rng = np.random.default_rng(0)
    batch = {b"data": rng.integers(0, 255, (4, 3 * 32 * 32), dtype=np.uint8),
             b"labels": [1, 2, 3, 4], b"batch_label": b"training batch 1 of 5"}
    return pickle.dumps(batch, protocol=2)


GENUINE = _genuine_batch()


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.integers(0, len(GENUINE) - 1), st.integers(0, 255)),
                min_size=1, max_size=8),
       st.integers(0, len(GENUINE)))
def test_mutated_batches_give_a_dict_or_a_data_error(flips, cut):
    data = bytearray(GENUINE)
    for position, value in flips:
        data[position] = value
    result = _read(bytes(data[: max(cut, 1)]))
    assert not SENTINEL.exists()
    assert isinstance(result, (dict, DataError)), type(result)


def test_genuine_batch_still_reads():
    batch = _read(GENUINE)
    assert isinstance(batch, dict) and batch["labels"] == [1, 2, 3, 4]
    assert batch["data"].shape == (4, 3072) and batch["data"].dtype == np.uint8


def test_a_plain_malicious_pickle_is_refused():
    class Evil:
        def __reduce__(self):
            return (eval, (f"open({str(SENTINEL)!r}, 'w')",))

    result = _read(pickle.dumps({"data": Evil()}))
    assert isinstance(result, DataError) and "forbidden object builtins.eval" in str(result)
    assert not SENTINEL.exists()
