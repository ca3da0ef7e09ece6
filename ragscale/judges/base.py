"""What every judge shares: a rendered prompt, its output schema, and typed parse failures."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Union


# The judging protocols (docs/metrics.md, "Judging protocols"): ``constrained`` (the default)
# renders ragscale's schema-constrained prompts; ``reference`` renders each judge as its
# reference does (messages, free-text output, sampling) and parses with the reference's rules.
PROTOCOLS = ("constrained", "reference")


@dataclass(frozen=True)
class JudgePrompt:
    """One generation request: chat messages plus the JSON schema that constrains the output
    (``None``: free text, as the references' own prompts ask for it)."""

    judge: str
    version: str
    messages: tuple[dict, ...]
    schema: dict | None = field(hash=False)
    max_tokens: int = 256
    # (temperature, seed) of this prompt's first attempt: a reference's own sampling (MT-RAG's
    # seed 100), or one of several samples of one prompt (ragas' answer relevancy: n
    # generations at temperature 0.3); None = greedy with seed 0
    sampling: tuple[float, int] | None = None
    # further sampling parameters sent on every attempt, e.g. (("presence_penalty", 0.5),)
    params: tuple[tuple[str, float], ...] = ()

    def text(self) -> str:
        """The rendered prompt as one string (for cache keys and prefix ordering)."""
        return "\n".join(f"<{m['role']}>\n{m['content']}" for m in self.messages)


class JudgeParseError(ValueError):
    """A judge output that could not be turned into a score; keeps the raw text."""

    def __init__(self, judge: str, raw: str, reason: str):
        super().__init__(f"{judge}: {reason}")
        self.judge = judge
        self.raw = raw
        self.reason = reason


# the start of a turn in ``JudgePrompt.text()``: "<role>" on a line of its own
ROLES = ("system", "user", "assistant", "tool", "developer")
_TURN = re.compile(r"(?:^|(?<=\n))<(?:" + "|".join(ROLES) + r")>\n")


def _turns_readable(prompt: JudgePrompt, text: str) -> bool:
    """Whether ``text`` (``prompt.text()``) splits back into its messages alone: every role is one of
    ``ROLES`` and the text has one turn start per message (no content holds, or completes, a line ``<user>``)."""
    return (all(m.get("role") in ROLES for m in prompt.messages)
            and len(_TURN.findall(text)) == len(prompt.messages))


def cache_key(engine: str, model: str, prompt: JudgePrompt, sampling: dict[str, Any]) -> str:
    """Stable key of a generation: engine, model, judge and prompt version, rendered prompt,
    schema, max tokens, sampling and extra parameters; what changes none of them (the order of a
    dict's keys) leaves it (tests/unit/test_cache_key.py)."""
    text = prompt.text()
    payload = json.dumps(
        {
            "engine": engine,
            "model": model,
            "judge": prompt.judge,
            "version": prompt.version,
            "prompt": text,
            "schema": prompt.schema,
            "max_tokens": prompt.max_tokens,
            "sampling": sampling,
            # only when set: the keys of prompts without extra parameters stay as they were
            # (in the order the judge declares them, fixed by its prompt version: keys of cached
            # generations stay valid)
            **({"params": [list(p) for p in prompt.params]} if prompt.params else {}),
            # only when the rendered text does not tell the turns apart (keys of the others unchanged)
            **({} if _turns_readable(prompt, text) else {"messages": [[m.get("role"), m.get("content")]
                                                                for m in prompt.messages]}),
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


class NestedTooDeep(ValueError):
    """A JSON text nested deeper than Python's parser follows (its recursion limit, ~1,000 levels)."""


def loads_json(text: str, strict: bool = True) -> Any:
    """``json.loads``, with a text nested too deep for it raising ``NestedTooDeep`` (a ValueError)
    instead of RecursionError: every parser that reads a judge's output as JSON reads it through
    this, so that such an output is unreadable JSON for that judge, never an exception that takes
    the record (or the batch) with it."""
    try:
        return json.loads(text, strict=strict)
    except RecursionError:
        raise NestedTooDeep("JSON nested deeper than Python's recursion limit") from None


def load_json_object(judge: str, raw: str) -> dict:
    """Parse a constrained-decoding output (a JSON object), or raise JudgeParseError.

    Raw control characters inside strings are accepted (``strict=False``): llama.cpp's JSON
    grammar lets a small model put a literal newline in an explanation, which says nothing
    about the score that follows it."""
    try:
        obj = loads_json(raw, strict=False)
    except NestedTooDeep:
        raise JudgeParseError(judge, raw, "output is not JSON (nested too deeply)") from None
    except (TypeError, ValueError):
        raise JudgeParseError(judge, raw, "output is not JSON") from None
    if not isinstance(obj, dict):
        raise JudgeParseError(judge, raw, "output is not a JSON object")
    return obj


@dataclass(frozen=True)
class Undefined:
    """A judged metric that is ``null`` by definition for this record (not a failure), and why."""

    reason: str


# A judge runs as a generator: it yields (prompt, parse) steps and receives each parsed
# output; its return value is the score (or Undefined). The judge actor advances the
# generators of all records of a batch together, so every round of prompts (e.g. RAGAS'
# statement extraction, then its verdicts) is one engine call across records.
Step = tuple[JudgePrompt, Callable[[str], Any]]
JudgeRun = Generator[Step, Any, Union[float, Undefined]]


def single(prompt: JudgePrompt, parse: Callable[[str], float]) -> JudgeRun:
    """A one-prompt judge: ask, parse, return the score."""
    return (yield prompt, parse)


@dataclass(frozen=True)
class Failed:
    """One prompt of a fan-out round (a yielded list of steps) that gave no usable output
    after the actor's re-asks: its reason and raw text. The judge decides what it means
    (e.g. one passage without a UMBRELA grade); the actor also lists it in judge_errors."""

    reason: str
    raw: str = ""


@dataclass
class JudgeResult:
    """What a judge that fills several metrics returns: ``metrics`` (metric name -> value
    as written to the record, ``None`` for undefined) and optional JSON-able ``details``
    (rationales, per-item labels) kept in the record under ``ragscale.details[<judge>]``."""

    metrics: dict[str, Any]
    details: Any = None


# A judge may also yield a *list* of steps (a fan-out round, e.g. one UMBRELA prompt per
# passage); it then receives a list with, per step, the parsed value or a ``Failed``. An
# empty list is answered with an empty list at once.
FanOut = list[Step]


def drive(run: JudgeRun, respond: Callable[[JudgePrompt], str],
          on_round: Callable[[Any], None] | None = None) -> Any:
    """Run a judge generator to completion with ``respond`` as the engine (no re-asks): for
    unit tests of judges and for one-off scripts. A parse failure of a single step raises
    JudgeParseError; in a fan-out round it is delivered as ``Failed``. ``on_round`` sees each
    yielded round (a step, or a fan-out list of steps) before it is answered."""
    try:
        step = next(run)
        while True:
            if on_round is not None:
                on_round(step)
            if isinstance(step, list):
                answers: list[Any] = []
                for prompt, parse in step:
                    raw = respond(prompt)
                    try:
                        answers.append(parse(raw))
                    except JudgeParseError as e:
                        answers.append(Failed(e.reason, raw))
                step = run.send(answers)
            else:
                prompt, parse = step
                step = run.send(parse(respond(prompt)))
    except StopIteration as stop:
        return stop.value


def probe_turns(u: str) -> list[dict]:
    """A conversation whose every turn is ``u`` (user, agent, user): a judge's ``probe`` input."""
    return [{"speaker": "user", "text": u}, {"speaker": "agent", "text": u}, {"speaker": "user", "text": u}]


@dataclass(frozen=True)
class JudgeSpec:
    """A judge as the registry holds it. ``start(inp: JudgeInput, **options) -> JudgeRun`` starts
    it on one record: ``inp`` is the record's frozen input (ragscale/judges/judge_input.py: its
    question, conversation, answer, references, passages and ids, labels, and the metrics the
    earlier stages and judges computed), ``options`` the actor's for this judge (``protocol=`` and
    ``model=``, see ``options``; the taxonomy judges' ``k=``)."""

    name: str
    metric: str  # the metric a plain score fills (MT-RAG judges); the first of ``metrics``
    version: str
    start: Callable[..., JudgeRun]  # (the record's JudgeInput, **the actor's options for it) -> judge run
    metrics: tuple[str, ...] = ()  # every metric the judge fills (default: ``metric``)
    after: tuple[str, ...] = ()  # judges whose metrics it reads (``JudgeInput.metrics``; they run first)
    # the prompt version of the ``reference`` protocol; None: the judge has none (ragscale's
    # own judges), it runs ``constrained`` whatever the run asks. A judge that has one takes
    # ``protocol=`` and ``model=`` (the judge model's name) in ``start``.
    reference_version: str | None = None
    # the dry run's estimate of one answer's tokens (ragscale prompts; capped at a prompt's max_tokens)
    completion_tokens: int = 100
    # the prompt-injection check (tests/unit/test_prompt_injection.py): ``probe(u)`` renders the
    # judge's prompts with the text ``u`` in every untrusted slot; ``delimiters`` says what keeps ``u``
    # in its place: ("markers", template) its template's section markers (templates.MARKERS),
    # ("tags", None) fenced blocks, ("json", None) ragas' JSON input
    probe: Callable[[str], list] | None = None
    delimiters: tuple[str, str | None] = ("tags", None)

    def __post_init__(self) -> None:
        if not self.metrics:
            object.__setattr__(self, "metrics", (self.metric,))

    def protocol(self, asked: str) -> str:
        """The protocol this judge runs when the run asks for ``asked``."""
        return "reference" if asked == "reference" and self.reference_version else "constrained"

    def version_for(self, asked: str) -> str:
        """The prompt version under the protocol asked for (run.json's prompt_versions)."""
        return self.reference_version if self.protocol(asked) == "reference" else self.version  # type: ignore[return-value]

    def options(self, asked: str, model: str) -> dict[str, Any]:
        """The protocol keyword arguments of ``start``: none for a judge without a reference protocol."""
        return {"protocol": self.protocol(asked), "model": model} if self.reference_version else {}
