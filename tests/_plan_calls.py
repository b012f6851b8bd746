"""A counter of planner.plan calls shared by the warm planner widgets' tests."""

import llmsizing.planner as planner_module


def counting_plan_calls(monkeypatch) -> list:
    """planner.plan, counting its calls by model (a planner widget binds it when it is built), for the warm
    widgets' tests (chapters 12 and 17)."""
    calls = []
    real = planner_module.plan

    def plan(*a, **k):
        calls.append(a[0] if a else k.get("model"))
        return real(*a, **k)

    monkeypatch.setattr(planner_module, "plan", plan)
    return calls
