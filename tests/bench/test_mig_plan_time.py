"""The plan-time measure plans one warmed-up MIG pool with a queue, MIG planning on and off."""

from __future__ import annotations

from optsched.bench.mig_plan_time import describe, measure_plan_time
from optsched.bench.mig_trace import TaskDraw, TaskPopulation
from optsched.mig.profiles import models
from optsched.settings import ModuleSwitches, Settings


def test_plan_time_reports_both_runs_on_the_same_snapshot() -> None:
    model = next(m for m in models() if m.name == "H100-80GB")
    population = TaskPopulation(
        (TaskDraw("a", 470, 1800), TaskDraw("b", 230, 900), TaskDraw("c", 810, None)), {}
    )
    settings = Settings(time_limit_s=0.2, deterministic_time=True, workers=1)
    result = measure_plan_time(population, model, 16, settings, seed=1, window_s=900, load=1.0)
    assert result.gpus == 16 and result.pending > 0 and result.running > 0
    assert result.switch == ("mig" in ModuleSwitches.model_fields)
    assert result.extra_s == result.with_mig_s - result.without_mig_s
    text = "\n".join(describe(result))
    assert "16 GPUs" in text and "on:" in text and "off:" in text
