"""The audit's options in one table: the CLI's arguments and the notebook's widgets agree."""

from __future__ import annotations

import dataclasses

import pytest

from eos_audit.audit.pipeline import AuditInputs
from eos_audit.cli import build_parser
from eos_audit.options import AUDIT_OPTIONS, NOT_GIVEN, config_overrides, inputs_fields

CLI = [
    "audit", "--batches", "a", "b", "--warehouse", "wh", "--batches-format", "segments",
    "--since-state", "--no-verify-crc", "--list-offsets", "lo", "--list-offsets-spec", "earliest",
    "--acks", "x.csv", "--acks-format", "csv", "--export-time", "2026-11-21T03:00:00Z",
    "--topic", "orders", "--partition", "3", "--fail-on", "error",
    "--max-quarantined-share", "0.2",
]  # fmt: skip
# The same run as a notebook's widgets (text; lists comma-separated; the rest as set up).
WIDGETS = {
    "batches": "a, b", "warehouse": "wh", "batches_format": "segments", "since_state": "true",
    "no_verify_crc": "true", "list_offsets": "lo", "list_offsets_spec": "earliest",
    "acks": "x.csv", "acks_format": "csv", "export_time": "2026-11-21T03:00:00Z",
    "topic": "orders", "partition": "3", "fail_on": "error", "max_quarantined_share": "0.2",
}  # fmt: skip


def _widget_values(texts: dict[str, str]) -> dict[str, object]:
    values = {}
    for option in AUDIT_OPTIONS:
        _, arguments = option.widget()
        values[option.name] = option.from_widget(texts.get(option.name, arguments[0]))
    return values


def test_a_run_given_on_the_command_line_or_in_widgets_has_the_same_inputs_and_settings():
    args = vars(build_parser().parse_args(CLI))
    widgets = _widget_values(WIDGETS)
    assert AuditInputs(**inputs_fields(args)) == AuditInputs(**inputs_fields(widgets))
    inputs = AuditInputs(**inputs_fields(args))
    assert (inputs.batches, inputs.verify_crc, inputs.since_state, inputs.dump_partition) == (
        ("a", "b"), False, True, 3,
    )  # fmt: skip
    assert config_overrides(args) == config_overrides(widgets) == {
        "run": {"fail_on": "error", "max_quarantined_share": 0.2}
    }


def test_options_left_out_are_the_defaults_on_both_sides():
    args = vars(build_parser().parse_args(["audit", "--batches", "a", "--warehouse", "wh"]))
    widgets = _widget_values({"batches": "a"})
    assert inputs_fields(args) == inputs_fields(widgets)
    assert AuditInputs(**inputs_fields(args)) == AuditInputs(batches=("a",))
    assert config_overrides(args) == config_overrides(widgets) == {}
    # A choice the configuration decides shows "configuration" in the notebook.
    fail_on = next(o for o in AUDIT_OPTIONS if o.name == "fail_on")
    assert fail_on.widget()[1][0] == NOT_GIVEN


def test_every_input_field_has_one_option():
    fields = {f.name for f in dataclasses.fields(AuditInputs)}
    set_by = [o.input_field for o in AUDIT_OPTIONS if o.input_field]
    assert sorted(set_by) == sorted(fields)


@pytest.mark.parametrize("text", ["1.5", "a tenth"])
def test_a_share_out_of_range_is_one_usage_line_on_the_command_line(text, capsys):
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["audit", "--batches", "a", "--warehouse", "w",
                                   "--max-quarantined-share", text])  # fmt: skip
    assert stopped.value.code == 2
    assert "--max-quarantined-share" in capsys.readouterr().err
