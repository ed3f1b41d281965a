"""The one registry shape: register (direct, decorator, aliases), get, choices, import paths."""

import pytest

from genlab.core.errors import ConfigError
from genlab.core.registry import Registry, import_path, path_of


def test_register_get_alias_and_choices():
    reg: Registry[int] = Registry("widget")
    reg.register("one", 1)

    @reg.register("two", aliases=("deux",))
    def two():
        return 2

    reg.alias("uno", "one")
    assert reg.get("one") == 1 and reg.get("uno") == 1 and reg["uno"] == 1
    assert reg.get("deux") is two and reg.canonical("deux") == "two"
    assert reg.names() == ("one", "two")
    assert reg.choices() == ("one", "two", "deux", "uno")
    assert "uno" in reg and "three" not in reg and len(reg) == 2
    assert dict(reg.items()) == {"one": 1, "two": two}
    with pytest.raises(ConfigError, match=r"unknown widget 'three'; expected one of: "
                                          r"one, two, deux, uno"):
        reg.get("three")
    with pytest.raises(ConfigError, match="unknown widget"):
        reg["three"]


def test_registering_a_taken_name_or_alias_is_refused():
    reg: Registry[int] = Registry("widget")
    reg.register("one", 1, aliases=("uno",))
    with pytest.raises(ConfigError, match="registered twice"):
        reg.register("one", 2)
    with pytest.raises(ConfigError, match="registered twice"):
        reg.register("uno", 2)
    reg.register("one", 3, replace=True)
    assert reg.get("uno") == 3
    with pytest.raises(ConfigError, match="unknown widget 'nine'"):
        reg.alias("x", "nine")
    with pytest.raises(ConfigError, match="is an entry"):
        reg.alias("one", "one")


def test_import_path_round_trip_and_errors():
    assert import_path("genlab.core.registry:Registry") is Registry
    assert import_path(path_of(import_path)) is import_path
    assert import_path(len) is len
    for bad in ("genlab.core.registry", "no_such_module_x:f", "genlab.core.registry:nope"):
        with pytest.raises(ConfigError):
            import_path(bad)
    with pytest.raises(ConfigError, match="not a module-level"):
        path_of(lambda: 0)


def test_a_module_that_left_its_package_resolves_under_its_old_path(tmp_path, monkeypatch):
    """A record written before a move names the old module; the package it left lists it in
    MOVED and import_path finds the function at its new home; a module not listed there is
    still refused."""
    (tmp_path / "oldhome").mkdir()
    (tmp_path / "oldhome" / "__init__.py").write_text('MOVED = {"parts": "newhome.parts"}\n')
    (tmp_path / "newhome").mkdir()
    (tmp_path / "newhome" / "__init__.py").write_text("")
    (tmp_path / "newhome" / "parts.py").write_text("def build():\n    return 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import newhome.parts

    assert import_path("oldhome.parts:build") is newhome.parts.build
    assert import_path("oldhome.parts:build")() == 7
    with pytest.raises(ConfigError, match="oldhome.other"):
        import_path("oldhome.other:build")
