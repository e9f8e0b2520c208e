import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from eos_audit.cli import main
from eos_audit.config import (
    _SECTIONS,
    NUMBER_RANGES,
    AuditConfig,
    glob_to_java_regex,
    globs_to_java_regex,
    load_config,
)
from eos_audit.errors import ConfigError

CONF = Path(__file__).resolve().parents[1] / "conf"


def test_defaults_file_states_the_code_defaults():
    assert load_config(CONF / "defaults.toml") == AuditConfig()


def test_example_nightly_config_loads():
    config = load_config(CONF / "nightly.example.toml")
    assert config.cluster.kafka_version == "3.6"
    assert config.topics.compacted == ("*-changelog", "ledger-state")
    assert config.run.fail_on == "error"


def test_defaults_file_documents_every_severity():
    raw = tomllib.loads((CONF / "defaults.toml").read_text())
    assert raw["severity"] == AuditConfig().severity


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[cluster]\nkafka_verison = '3.7'\n", "unknown key(s) ['kafka_verison'] in [cluster]"),
        ("[clusterr]\n", "unknown section(s) ['clusterr']"),
        ("[run]\nfail_on = 'sometimes'\n", "run.fail_on must be one of"),
        ("[cluster]\nkafka_version = 'three'\n", "is not a Kafka version"),
        ("[cluster]\nproducer_id_expiration_ms = -5\n", "must be an integer from 1 to 2147483647"),
        (
            "[cluster]\nproducer_id_expiration_ms = 99999999999999999999\n",
            "cluster.producer_id_expiration_ms must be an integer from 1 to 2147483647, got "
            "99999999999999999999",
        ),
        ("[transactions]\nmax_timeout_ms = 0\n", "transactions.max_timeout_ms must be an integer"),
        ("[transactions]\ngrace_ms = 2147483648\n", "grace_ms must be an integer from 0 to"),
        ("[transactions]\ngrace_ms = 1.5\n", "grace_ms must be an integer from 0 to"),
        ("[topics]\ncompacted = 'ledger'\n", "must be a list of strings"),
        ("[severity]\nSEQUENCE_GAP = 'LOUD'\n", "severity.SEQUENCE_GAP must be one of"),
        ("[severity]\nNOT_A_TYPE = 'INFO'\n", "unknown finding type 'NOT_A_TYPE'"),
        ("[output]\nwriter = 'csv'\n", "output.writer must be one of"),
        ("[run]\nmax_quarantined_share = 5\n", "must be a number from 0 to 1, got 5"),
        ("[run]\nmax_quarantined_share = '1%'\n", "must be a number from 0 to 1, got '1%'"),
        ("not toml at all = = =", "is not valid TOML"),
    ],
)
def test_invalid_configuration_is_rejected_with_the_key(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path)


def test_every_number_of_the_configuration_has_a_range():
    """A new integer or float key must declare its range (config.NUMBER_RANGES)."""
    numbers = {
        f"{section}.{f.name}"
        for section, cls in _SECTIONS.items()
        for f in dataclasses.fields(cls)
        if "int" in str(f.type) or "float" in str(f.type)
    }
    assert numbers == set(NUMBER_RANGES)


def test_a_number_beyond_its_range_exits_2_naming_the_key(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text("[cluster]\nproducer_id_expiration_ms = 99999999999999999999\n")
    code = main(["audit", "--batches", str(tmp_path), "--warehouse", str(tmp_path / "w"),
                 "--conf", str(path)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        f"eos-audit: error: {path}: cluster.producer_id_expiration_ms must be an integer from 1 "
        "to 2147483647, got 99999999999999999999"
    ]


def test_missing_config_file():
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("/nonexistent/eos.toml")


@pytest.mark.parametrize(
    ("version", "expected_ms"),
    [("3.3", 604_800_000), ("2.8.1", 604_800_000), ("3.4", 86_400_000), ("4.1", 86_400_000)],
)
def test_expiration_default_follows_kip_854(tmp_path, version, expected_ms):
    path = tmp_path / "c.toml"
    path.write_text(f"[cluster]\nkafka_version = '{version}'\n")
    assert load_config(path).cluster.effective_expiration_ms == expected_ms


def test_explicit_expiration_wins(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[cluster]\nkafka_version = '2.0'\nproducer_id_expiration_ms = 1000\n")
    assert load_config(path).cluster.effective_expiration_ms == 1000


def test_overrides_are_validated():
    assert AuditConfig().with_overrides(run={"fail_on": "never"}).run.fail_on == "never"
    with pytest.raises(ConfigError, match="run.fail_on"):
        AuditConfig().with_overrides(run={"fail_on": "loud"})


def test_quarantine_share_defaults_to_one_percent_and_accepts_integers(tmp_path):
    assert AuditConfig().run.max_quarantined_share == 0.01
    path = tmp_path / "c.toml"
    path.write_text("[run]\nmax_quarantined_share = 1\n")
    assert load_config(path).run.max_quarantined_share == 1.0


def test_glob_translation_is_anchored_java_regex():
    regex = glob_to_java_regex("*-changelog")
    assert regex == "^.*\\-changelog$"
    assert re.match(regex, "orders-changelog")
    assert not re.match(regex, "orders-changelog-old")
    assert re.match(glob_to_java_regex("a.b?"), "a.bc")
    assert not re.match(glob_to_java_regex("a.b?"), "axbc")


def test_several_globs_are_one_regex_matching_any_and_none_is_none():
    regex = globs_to_java_regex(("*-changelog", "cdc.?"))
    assert [bool(re.match(regex, t)) for t in ("a-changelog", "cdc.1", "cdc.12", "other")] == [
        True, True, False, False,
    ]  # fmt: skip
    assert globs_to_java_regex(()) is None
