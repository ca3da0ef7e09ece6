"""ragas' ``reference`` protocol, shared by its judges (faithfulness, answer relevancy, context
precision and recall): prompt rendering, generation loop and output parser.

A judge's ``reference`` protocol runs ragas' own generation loop (``PydanticPrompt.generate`` through
``LangchainLLMWrapper``, as ``ragas.evaluate`` wraps MT-RAG's LangChain chat model): the prompt
string as one user message, no schema, temperature 0.01 (0.3 for n > 1 samples), and ragas'
parser: ``extract_json`` (the first balanced ``{...}``/``[...]``, after a ```` ```json ```` mark),
LangChain's ``parse_json_markdown`` / ``parse_partial_json`` (code fences stripped, unclosed
strings and brackets closed, trailing characters dropped until it parses) and pydantic's lax
validation of the output model (``"1"``, ``1.0`` and ``true`` are the integer 1, extra keys
ignored). An output that does not parse is sent to ragas' FixOutputFormat prompt (the output
and the prompt, asking for ``{"text": <fixed output>}``), nested as ragas nests it
(``retries_left`` 3). It differs from ragas in what ragscale's engines cannot do:

- a fixed seed (0) and ``max_tokens`` 2048 (MT-RAG's local judge's ``max_new_tokens``; its
  vLLM ChatOpenAI sets none), where ragas sends no seed;
- an output cut at ``max_tokens`` is parsed as it is (ragas raises LLMDidNotFinishException on
  a ``length`` finish reason, and the sample is NaN): engines report no finish reason;
- where ragas gives up (the last fix's output does not parse either), ragscale re-asks that
  prompt ``judge.max_retries`` times at temperature 0.7 (the actor's policy) before the score
  is ``null`` with the parse failure in ``judge_errors``; ragas' NaN is ``judge.max_retries=0``;
- LangChain's ``_custom_parser`` (it re-escapes an ``"action_input"`` value, a key no ragas
  output model has) is left out.

Each judge's own differences are in its module (faithfulness.py, ragas_metrics.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Generator, Sequence

from ragscale.judges.base import JudgeParseError, JudgePrompt, NestedTooDeep, Step, loads_json
from ragscale.judges.templates import load_template


def _input_json(data: dict) -> str:
    # pydantic's model_dump_json(indent=4): field order kept, non-ASCII text as is
    return json.dumps(data, indent=4, ensure_ascii=False)


def render(template: str, data: dict) -> str:
    """ragas' ``PydanticPrompt.to_string(data)``: the prompt's fixed part (a template rendered
    from ragas' prompt class), then ``input: <JSON>`` and ``Output: ``."""
    return load_template(template) + "input: " + _input_json(data) + "\nOutput: "


REFERENCE_TEMPERATURE = 0.01  # BaseRagasLLM.get_temperature(n == 1)
REFERENCE_MAX_TOKENS = 2048  # MT-RAG's local ragas judge (LocalLLM max_new_tokens); ragas sets none
FIX_RETRIES = 3  # PydanticPrompt.generate(retries_left=3): the nesting depth of FixOutputFormat

# ragas' output models as shapes: ``str``, ``int``, ``[shape]`` (a list of), ``{field: shape}``
# (a pydantic model: every field required, other keys ignored)
TEXT_MODEL = {"text": str}  # StringIO, FixOutputFormat's output


def extract_json(text: str) -> str:
    """ragas ``prompt.utils.extract_json``: from a ```` ```json ```` mark if there is one, the
    first ``{``/``[`` and the text up to where that bracket kind balances (string contents are
    not skipped); the text unchanged when there is no bracket or it never balances."""
    mark = text.find("```json")
    if mark >= 0:
        text = text[mark:]
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return text
    start = min(starts)
    opening = text[start]
    closing = "}" if opening == "{" else "]"
    depth = 0
    for end in range(start, len(text)):
        depth += (text[end] == opening) - (text[end] == closing)
        if depth == 0:
            return text[start:end + 1]
    return text


def _loads_partial(s: str) -> Any:
    """LangChain's ``parse_partial_json``: ``s`` as JSON (control characters allowed in strings);
    else with an unterminated string closed (a dangling backslash dropped) and unclosed
    brackets closed, dropping trailing characters until that parses. ``None`` when a bracket
    closes one of the other kind; JSONDecodeError when nothing parses. (LangChain also escapes
    raw newlines inside strings there: the same value, since control characters are allowed.)
    A text nested too deep raises NestedTooDeep (LangChain: a RecursionError, which ragas does
    not fix but counts as the row's failure)."""
    try:
        return loads_json(s, strict=False)
    except json.JSONDecodeError:
        pass
    kept: list[str] = []
    open_brackets: list[str] = []
    in_string = escaped = False
    for ch in s:
        if in_string:
            if ch == '"' and not escaped:
                in_string = False
            elif ch == "\\":
                escaped = not escaped
            else:
                escaped = False
        elif ch == '"':
            in_string, escaped = True, False
        elif ch in "{[":
            open_brackets.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not open_brackets or open_brackets[-1] != ch:
                return None
            open_brackets.pop()
        kept.append(ch)
    if in_string:
        if escaped:
            kept.pop()
        kept.append('"')
    closers = "".join(reversed(open_brackets))
    while kept:
        try:
            return loads_json("".join(kept) + closers, strict=False)
        except json.JSONDecodeError:
            kept.pop()
    return loads_json(s, strict=False)


_STRIP = " \n\r\t`"


def parse_json_markdown(text: str) -> Any:
    """LangChain's ``JsonOutputParser`` on ``text``: stripped of whitespace and backticks and read
    by ``_loads_partial``; if that raises, the same on what follows the first ```` ``` ````
    (and an optional ``json``). Raises ValueError (json.JSONDecodeError) when neither parses."""
    text = text.strip()
    try:
        return _loads_partial(text.strip(_STRIP))
    except json.JSONDecodeError:
        fence = text.find("```")
        if fence >= 0:
            text = text[fence + 3:].removeprefix("json")
    return _loads_partial(text.strip(_STRIP))


def _as_int(value: Any) -> int:
    """pydantic's lax ``int``: an int or bool; a finite float with no fraction (|x| < 2**63); a
    string of ASCII digits (``_`` between digits, a sign, a ``.000`` tail, surrounding whitespace)."""
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        if not value.is_integer():
            raise ValueError("a number with a fractional part")
        if abs(value) >= 2.0 ** 63:
            raise ValueError("an integer too large")
        return int(value)
    if isinstance(value, str):
        t = value.strip()
        head, dot, tail = t.partition(".")
        sign = head[:1] if head[:1] in "+-" else ""
        digits = head[len(sign):]
        groups = digits.split("_")
        if (digits and all(g and g.isascii() and g.isdigit() for g in groups)
                and (not dot or (tail and set(tail) == {"0"}))):
            return int(sign + "".join(groups))
        raise ValueError("a string that is not an integer")
    raise ValueError(f"{type(value).__name__}, not an integer")


def validate(shape: Any, value: Any, where: str = "output") -> Any:
    """``value`` checked and coerced against an output model's ``shape`` as pydantic's
    ``model_validate`` does (lax mode); ValueError names the first field that does not fit."""
    if shape is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: {type(value).__name__}, not a string")
        return value
    if shape is int:
        try:
            return _as_int(value)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    if isinstance(shape, list):
        if not isinstance(value, list):
            raise ValueError(f"{where}: {type(value).__name__}, not a list")
        return [validate(shape[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, dict):
        raise ValueError(f"{where}: {type(value).__name__}, not an object")
    missing = [k for k in shape if k not in value]
    if missing:
        raise ValueError(f"{where}: lacks {', '.join(missing)}")
    return {k: validate(sub, value[k], f"{where}.{k}") for k, sub in shape.items()}


def ragas_parse(shape: dict, text: str, extract: bool = True) -> dict:
    """ragas' ``RagasOutputParser``: ``extract_json`` (``extract``; the re-parse of a fixed output
    skips it), then LangChain's ``PydanticOutputParser.parse``. Raises ValueError."""
    return validate(shape, parse_json_markdown(extract_json(text) if extract else text))


def reference_prompt(judge: str, version: str, text: str, sample: int | None = None,
                     temperature: float = REFERENCE_TEMPERATURE) -> JudgePrompt:
    """A ragas prompt string as ``LangchainLLMWrapper`` sends it: one user message, free text,
    ragas' temperature (``sample``: the index of one of n samples, its seed)."""
    return JudgePrompt(judge, version, ({"role": "user", "content": text},), None, max_tokens=REFERENCE_MAX_TOKENS,
                       sampling=(temperature, sample or 0))


def fix_prompt(prompt: JudgePrompt, raw: str) -> JudgePrompt:
    """ragas' FixOutputFormat prompt for an output of ``prompt`` that did not parse."""
    data = {"output_string": raw, "prompt_value": prompt.messages[0]["content"]}  # OutputStringAndPrompt
    return reference_prompt(prompt.judge, prompt.version, render("ragas_fix_output_format_ref_v1", data))


@dataclass(frozen=True)
class _Unparsed:
    """An output that did not parse while ragas would still ask FixOutputFormat to fix it."""

    raw: str


def _parser(judge: str, chain: Sequence[Any], retries_left: int) -> Callable[[str], Any]:
    """The parse of one generation of ragas' loop. ``chain``: the output model of this prompt,
    then those of the prompts whose outputs it fixes (innermost first): a fixed output's
    ``text`` is parsed as the next model without ``extract_json``, as ragas re-parses it.
    An unparsable output with retries left is ``_Unparsed`` (the judge asks for a fix); with
    none, or a fixed text that does not parse, it is a JudgeParseError (ragas: an exception)."""

    def parse(raw: str) -> Any:
        try:
            value = ragas_parse(chain[0], raw)
        except NestedTooDeep:  # ragas: an exception it does not fix (the row's metric NaN)
            raise JudgeParseError(judge, raw, "not ragas' output model (JSON nested too deeply)") from None
        except ValueError as e:
            if retries_left:
                return _Unparsed(raw)
            raise JudgeParseError(judge, raw, f"not ragas' output model ({e})") from None
        for shape in chain[1:]:
            try:
                value = ragas_parse(shape, value["text"], extract=False)
            except ValueError as e:
                raise JudgeParseError(judge, raw, f"the fixed output is not ragas' output model ({e})") from None
        return value

    return parse


def ask(prompt: JudgePrompt, shape: dict) -> Generator[Step, Any, dict]:
    """ragas' ``PydanticPrompt.generate`` for one reference prompt: ask, parse, and while an output
    does not parse, ask FixOutputFormat (up to ``FIX_RETRIES`` nested fixes). Use as
    ``value = yield from ask(...)``; a final parse failure is the actor's (a JudgeParseError)."""
    chain: list[Any] = [shape]
    retries = FIX_RETRIES
    while True:
        value = yield prompt, _parser(prompt.judge, chain, retries)
        if not isinstance(value, _Unparsed):
            return value
        prompt, chain, retries = fix_prompt(prompt, value.raw), [TEXT_MODEL, *chain], retries - 1


def ask_all(prompts: Sequence[JudgePrompt], shape: dict) -> Generator[list[Step], Any, list[Any]]:
    """``ask`` for several prompts as fan-out rounds (each fix round holds the outputs that did not
    parse); the values in order, ``Failed`` where a prompt gave none. Nothing is asked for none."""
    state = [(p, [shape], FIX_RETRIES) for p in prompts]
    values: list[Any] = [None] * len(prompts)
    pending = list(range(len(prompts)))
    while pending:
        answers = yield [(state[i][0], _parser(state[i][0].judge, state[i][1], state[i][2])) for i in pending]
        again = []
        for i, value in zip(pending, answers):
            if isinstance(value, _Unparsed):
                prompt, chain, retries = state[i]
                state[i] = (fix_prompt(prompt, value.raw), [TEXT_MODEL, *chain], retries - 1)
                again.append(i)
            else:
                values[i] = value
        pending = again
    return values
