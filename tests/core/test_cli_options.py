"""The shared CLI parsers (genlab.cli.options) and the option spelling of error lines."""

import pytest

from genlab.cli import option_spelling
from genlab.core.errors import ConfigError
from genlab.core.options import parse_seeds, parse_size


@pytest.mark.parametrize(("text", "seeds"), [("0,1,2", [0, 1, 2]), ("0-4", [0, 1, 2, 3, 4]),
                                             ("3", [3]), ("0-2, 7", [0, 1, 2, 7]),
                                             ("5-5", [5])])
def test_parse_seeds_lists_and_ranges(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "4-2", "0,0", "-1", "1.5", "0-"])
def test_parse_seeds_refuses_with_the_option_name(text):
    with pytest.raises(ConfigError, match="^seeds: "):
        parse_seeds(text)


@pytest.mark.parametrize(("text", "size"), [("32", (32, 32)), ("32x48", (32, 48)),
                                            ("32X48", (32, 48)), (16, (16, 16))])
def test_parse_size_square_or_height_by_width(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "32x", "x48", "32x48x3", "big", "0", "4x0"])
def test_parse_size_refuses(text):
    with pytest.raises(ConfigError, match="^size: "):
        parse_size(text)


def test_parse_size_square_only_and_minimum():
    with pytest.raises(ConfigError, match="square"):
        parse_size("32x48", square=True)
    with pytest.raises(ConfigError, match=">= 8"):
        parse_size("4x48", minimum=8)


def test_option_spelling_uses_the_invoked_commands_flags():
    argv = ["nas", "search", "--out", "x", "--batch-size", "0"]
    assert option_spelling("batch_size must be > 0", argv) == "--batch-size must be > 0"
    assert option_spelling("batch-size must be > 0", argv) == "--batch-size must be > 0"
    assert option_spelling("--batch-size must be > 0", argv) == "--batch-size must be > 0"
    # a word of another command, or inside a longer name, is left alone
    assert option_spelling("my_batch_size_x", argv) == "my_batch_size_x"
    assert option_spelling("data_seed", argv) == "data_seed"


def test_option_spelling_of_one_word_options_only_where_they_name_the_option():
    argv = ["optim", "train", "--out", "x", "--arch", "foo"]
    assert option_spelling("unknown arch 'foo'; expected one of: mlp", argv) == \
        "unknown --arch 'foo'; expected one of: mlp"
    assert option_spelling("width must be <= 65,536", argv) == "--width must be <= 65,536"
    assert option_spelling("the arch of the run", argv) == "the arch of the run"
    assert option_spelling("unknown --arch 'foo'", argv) == "unknown --arch 'foo'"


@pytest.mark.parametrize(("argv", "word"), [
    (["nas", "search", "--out", "x", "--threads", "-1"], "--threads"),
    (["nas", "search", "--out", "x", "--bogus"], "--bogus"),
    (["nas", "lookup"], "arch"),
    (["nas", "searhc"], "searhc"),
    (["optim", "train", "--out", "x", "--epochs", "abc"], "--epochs"),
])
def test_what_click_refuses_is_one_line_and_exit_2(argv, word, tmp_path, capsys, monkeypatch):
    from genlab.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("genlab: bad option: ") and word in lines[0]
    assert "--help" in lines[0] and not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", ["foo", "gpu", "cuda:x"])
def test_an_unknown_device_is_one_short_line(name):
    from genlab.core.devices import resolve_device

    with pytest.raises(ConfigError) as exc:
        resolve_device(name)
    assert str(exc.value) == f"--device {name!r} is not a device; use cpu, cuda, cuda:N or auto"
