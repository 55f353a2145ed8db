"""The research agent: plan, research, analyze, recommend, report, notify.

The "model" is offline and deterministic, so the example runs anywhere. Input:
`{"topic": "...", "slow_seconds": 0}`; `slow_seconds` makes research_1 slow enough to kill the
worker during it and watch another worker resume without repeating finished steps.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from perdure.worker import WorkflowContext, current_step, workflow


def offline_model(prompt: str) -> str:
    """A deterministic stand-in for a language model call."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:8]
    return f"[{digest}] {prompt.split(':', 1)[0]} done"


def research(topic: str, angle: str, slow_seconds: float) -> dict[str, str]:
    """One research call; optionally slow, to leave time for a kill -9."""
    if slow_seconds:
        time.sleep(slow_seconds)
    return {"angle": angle, "notes": offline_model(f"research {angle}: {topic}")}


def notify(report: str) -> dict[str, str]:
    """Send the report; the idempotency key lets a real mail API drop a duplicate send."""
    return {"sent": report[:40], "idempotency_key": current_step().idempotency_key}


@workflow
async def research_agent(ctx: WorkflowContext, params: dict[str, Any] | None) -> dict[str, Any]:
    """Research a topic in seven durable steps."""
    params = params or {}
    topic = str(params.get("topic", "durable execution"))
    slow = float(params.get("slow_seconds", 0))
    plan = await ctx.step("create_plan", offline_model, f"plan: {topic}")
    first = await ctx.step("research_1", research, topic, "background", slow)
    second = await ctx.step("research_2", research, topic, "state of the art", 0)
    analysis = await ctx.step("analyze", offline_model, f"analyze: {first} {second}")
    recommendation = await ctx.step("recommend", offline_model, f"recommend: {analysis}")
    report = await ctx.step("report", offline_model, f"report: {plan} {recommendation}")
    sent = await ctx.step("notify", notify, report)
    return {"topic": topic, "recommendation": recommendation, "report": report, "notified": sent}
