"""eos-audit's Python daemon: PySpark's, without the trace of a worker whose reader went away."""

from __future__ import annotations

import pytest

from eos_audit import python_daemon


@pytest.mark.parametrize("error", [BrokenPipeError(32, "Broken pipe"), ConnectionResetError()])
def test_a_worker_whose_reader_went_away_prints_nothing(capsys, error):
    try:
        raise error
    except OSError:
        python_daemon.print_exc_unless_reader_gone()
    assert capsys.readouterr().err == ""


def test_any_other_exception_is_printed_as_pyspark_prints_it(capsys):
    try:
        raise ValueError("a real failure")
    except ValueError:
        python_daemon.print_exc_unless_reader_gone()
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "ValueError: a real failure" in err
