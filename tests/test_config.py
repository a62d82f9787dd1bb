"""The configuration spec and its validation: pure logic, no MXNet calls."""

import json
import os

import pytest

from pyprof import config
from pyprof.errors import ConfigError


def test_spec_lists_the_ten_mxnet_keys_with_c_defaults():
    ks = config.keys()
    assert list(ks) == ["profile_all", "profile_symbolic", "profile_imperative",
                        "profile_memory", "profile_api", "filename", "continuous_dump",
                        "dump_period", "aggregate_stats", "profile_process"]
    assert ks["profile_all"].default is False and ks["profile_symbolic"].default is True
    assert ks["filename"].default == "profile.json"
    assert ks["dump_period"].default == 1.0 and ks["dump_period"].unit == "s"
    assert ks["profile_process"].choices == ("worker", "server")


def test_spec_is_one_json_file_shared_with_the_jvm_project():
    raw = json.loads(config.SPEC_PATH.read_text())
    assert {k["name"] for k in raw["keys"]} == set(config.keys())
    project = (config.SPEC_PATH.parents[2] / "jvm" / "project.clj").read_text()
    assert '"../pyprof/spec"' in project  # the JVM reads this same file from its classpath


@pytest.mark.parametrize("value, expected", [
    (True, "true"), (False, "false"), (1, "true"), (0, "false"),
    ("TRUE", "true"), ("False", "false"), ("1", "true"), ("0", "false"),
])
def test_bool_values_become_the_strings_c_accepts(value, expected):
    assert config.validate({"profile_api": value}) == {"profile_api": expected}


@pytest.mark.parametrize("value", ["yes", "", 2, -1, None, 1.5, "on"])
def test_bool_rejects_what_c_rejects(value):
    with pytest.raises(ConfigError, match="profile_api"):
        config.validate({"profile_api": value})


def test_float_and_enum_and_string():
    assert config.validate({"dump_period": 0.5}) == {"dump_period": "0.5"}
    assert config.validate({"dump_period": "2"}) == {"dump_period": "2"}
    assert config.validate({"profile_process": "server"}) == {"profile_process": "server"}
    assert config.validate({"filename": "b.json"}) == {"filename": os.path.abspath("b.json")}
    inside = str(config.SPEC_PATH.parent / "b.json")
    assert config.validate({"filename": inside}) == {"filename": inside}
    with pytest.raises(ConfigError, match="directory .* does not exist"):
        config.validate({"filename": str(config.SPEC_PATH.parent / "no-such-dir" / "b.json")})
    for bad in (0, -1, "x", True, float("nan")):
        with pytest.raises(ConfigError, match="dump_period"):
            config.validate({"dump_period": bad})
    with pytest.raises(ConfigError, match="'worker', 'server'"):
        config.validate({"profile_process": "Server"})  # C is case sensitive
    with pytest.raises(ConfigError, match="filename"):
        config.validate({"filename": 3})


def test_unknown_key_names_the_nearest_and_lists_all():
    with pytest.raises(ConfigError) as info:
        config.validate({"profile_symbolc": True})
    msg = str(info.value)
    assert "did you mean 'profile_symbolic'" in msg
    for k in config.keys():
        assert k in msg
    with pytest.raises(ConfigError, match="did you mean 'filename'"):
        config.validate({"file_name": "x.json"})  # the key the Scala docs used


def test_effective_config_resets_omitted_keys_to_c_defaults():
    eff = config.effective({"profile_api": "false"})
    assert eff["profile_api"] == "false"
    assert eff["profile_symbolic"] == "true" and eff["aggregate_stats"] == "false"
    assert eff["filename"] == "profile.json" and eff["dump_period"] == "1"


def test_docs_configuration_page_matches_the_spec():
    page = (config.SPEC_PATH.parents[2] / "docs" / "configuration.md").read_text()
    assert config.markdown_table() in page, "regenerate: pyprof config >> docs/configuration.md"


def test_a_number_no_float_holds_is_a_bad_value_not_an_overflow():
    with pytest.raises(ConfigError) as info:
        config.validate({"dump_period": 10**400})
    assert info.value.code == "config.bad_value"


def test_a_list_value_is_shown_as_a_literal():
    # {value!r} of [] and () rendered as nothing ("invalid value  for ..."): a parity probe's find
    for value, shown in (([], "[]"), ((), "()"), ([1, 2], "[1, 2]")):
        with pytest.raises(ConfigError) as e:
            config.validate({"aggregate_stats": value})
        assert str(e.value).startswith(f"invalid value {shown} for profiler config key 'aggregate_stats'")
