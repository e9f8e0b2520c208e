"""The bench times its lines in rounds, side by side, and keeps each line's best (no Spark)."""

from __future__ import annotations

from bench import run


def _clock(monkeypatch, durations: list[float]) -> None:
    """`time.perf_counter` for the bench: the runs last `durations`, in the order they run."""
    readings: list[float] = []
    for at, duration in enumerate(durations):
        readings += [100.0 * at, 100.0 * at + duration]
    clock = iter(readings)
    monkeypatch.setattr(run.time, "perf_counter", lambda: next(clock))


def test_lines_run_in_rounds_and_each_keeps_its_best(monkeypatch):
    calls: list[str] = []
    _clock(monkeypatch, [5, 9, 3, 12, 4, 7])  # floor 5, audit 9, floor 3, audit 12, ...
    best = run.interleaved(
        {"floor": lambda: calls.append("floor"), "audit": lambda: calls.append("audit")}, 3
    )
    assert calls == ["floor", "audit"] * 3
    assert best == {"floor": 3.0, "audit": 7.0}


def test_a_warm_up_round_runs_first_and_is_not_counted_in_the_best(monkeypatch):
    calls: list[str] = []
    # Warm-up: floor 50, audit (its own warm-up action) 90; then floor 5, audit 9, floor 6, audit 8.
    _clock(monkeypatch, [50, 90, 5, 9, 6, 8])
    best = run.interleaved(
        {"floor": lambda: calls.append("floor"), "audit": lambda: calls.append("audit")},
        2,
        warm_up={"audit": lambda: calls.append("sampled audit")},
    )
    assert calls == ["floor", "sampled audit", "floor", "audit", "floor", "audit"]
    assert best == {"floor": 5.0, "audit": 8.0, "floor_first": 50.0, "audit_first": 90.0}
