"""Judge actor: an LLM engine behind one interface, fed rendered prompts by ragscale.judges.

Engines (actors/engines/: llama.cpp, vLLM, OpenAI-compatible) take a batch of
``JudgePrompt``s (chat messages + JSON schema) and return texts.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa

from actors.engines import build
from ragscale.judges import idk, radbench
from ragscale.judges.base import JudgeParseError, JudgePrompt, cache_key
from ragscale.pipeline.stages import add_stats, apply_per_record, to_table


# judge name -> (metric it fills, render(record fields) -> prompt, parse(text) -> score)
JUDGES: dict[str, tuple[str, Callable[[dict, dict], JudgePrompt], Callable[[str], float]]] = {
    "idk": ("idk_eval", lambda obj, row: idk.render(obj.get("input") or [], row["prediction"]), idk.parse),
    "radbench": (
        "RB_llm",
        lambda obj, row: radbench.render(obj.get("input") or [], row["targets"][0], row["passages"], row["prediction"]),
        radbench.parse,
    ),
}


class JudgeActor:
    """Ray Data actor: runs the enabled judges over a batch of records.

    For each (record, judge) the prompt is rendered and looked up in the on-disk cache;
    the missing ones are generated in one engine call; outputs are parsed. A parse
    failure is retried a bounded number of times with sampling (temperature 0.7, new
    seed); if it still fails the metric is ``null`` and the record's ``judge_errors``
    keeps the raw text. Counters go to the batch's stats.
    """

    def __init__(self, engine: Mapping[str, Any], judges: Sequence[str], cache_path: str | None, max_retries: int = 1):
        self.engine = build(engine)
        self.engine_name = self.engine.name
        self.model_name = self.engine.model
        self.judges = list(judges)
        self.max_retries = int(max_retries)
        self.cache = None
        if cache_path:
            from ragscale.judges.cache import JudgeCache

            self.cache = JudgeCache(cache_path)

    def _generate(self, prompts: list[JudgePrompt], attempt: int, stats: dict) -> list[str]:
        sampling = {"temperature": 0.0 if attempt == 0 else 0.7, "seed": attempt}
        keys = [cache_key(self.engine_name, self.model_name, p, sampling) for p in prompts]
        cached = self.cache.get_many(keys) if self.cache else {}
        todo = [i for i, k in enumerate(keys) if k not in cached]
        stats["judge_cache_hits"] = stats.get("judge_cache_hits", 0) + len(prompts) - len(todo)
        texts = {k: v[0] for k, v in cached.items()}
        if todo:
            gens = self.engine.generate([prompts[i] for i in todo], **sampling)
            for i, g in zip(todo, gens):
                texts[keys[i]] = g.text
                stats["judge_generations"] = stats.get("judge_generations", 0) + 1
                stats["judge_prompt_tokens"] = stats.get("judge_prompt_tokens", 0) + g.prompt_tokens
                stats["judge_completion_tokens"] = stats.get("judge_completion_tokens", 0) + g.completion_tokens
            if self.cache:
                self.cache.put_many(
                    (keys[i], g.text, {"prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens})
                    for i, g in zip(todo, gens)
                )
        return [texts[k] for k in keys]

    def _judge(self, rows: list[dict], stats: dict) -> None:
        tasks = []  # (row, judge, prompt)
        for row in rows:
            obj = json.loads(row["raw"])
            for j in self.judges:
                tasks.append((row, j, JUDGES[j][1](obj, row)))
        stats["judge_prompts"] = stats.get("judge_prompts", 0) + len(tasks)
        pending = list(range(len(tasks)))
        results: dict[int, float] = {}
        failures: dict[int, tuple[str, str]] = {}
        for attempt in range(self.max_retries + 1):
            if not pending:
                break
            if attempt:
                stats["judge_retries"] = stats.get("judge_retries", 0) + len(pending)
            texts = self._generate([tasks[i][2] for i in pending], attempt, stats)
            still = []
            for i, text in zip(pending, texts):
                try:
                    results[i] = JUDGES[tasks[i][1]][2](text)
                    failures.pop(i, None)
                except JudgeParseError as e:
                    failures[i] = (e.reason, text)
                    still.append(i)
            pending = still
        stats["judge_parse_failures"] = stats.get("judge_parse_failures", 0) + len(failures)
        for i, (row, j, _) in enumerate(tasks):
            metric = JUDGES[j][0]
            m = json.loads(row["metrics"])
            m[metric] = [results[i]] if i in results else None
            row["metrics"] = json.dumps(m)
            if i in failures:
                errs = json.loads(row["judge_errors"]) if row.get("judge_errors") else []
                errs.append({"judge": j, "reason": failures[i][0], "raw": failures[i][1]})
                row["judge_errors"] = json.dumps(errs)

    def __call__(self, batch: pa.Table) -> pa.Table:
        t0 = time.perf_counter()
        rows = batch.to_pylist()
        stats: dict = {}
        apply_per_record(rows, "judge", lambda rs: self._judge(rs, stats))
        add_stats(rows, time_judge_s=time.perf_counter() - t0, **stats)
        return to_table(rows)
