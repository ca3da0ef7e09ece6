"""Overrides as the user types them (``key=value`` on the command line, ``overrides=[...]`` in
Python): normalised (``metrics=[a,b]`` is ``select=[a,b]``, ``input.columns.<field>`` is
``columns.<field>``), refused when they hold a secret, composed into the config, and every error
Hydra or OmegaConf raises over them explained in one line in the user's words (``explain``;
docs/configuration.md lists the messages). Secrets never reach a file: every override, in every
mode (each value of a ``-m`` sweep too), is checked before Hydra writes ``.hydra/`` or ``multirun.yaml``.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, Sequence, Union, get_args, get_origin, get_type_hints

from ragscale.errors import UserError, closest, ratio
from ragscale.secrets import check_config, refuse_secrets

CONF_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conf")
# config groups a run adds with `+` (no default in conf/config.yaml), and what one option is
PLUS_GROUPS = {"scenario": "a scenario", "judge_panel": "a judge panel"}
# what one option of each config group is called in a message
GROUP_NOUNS = {"scenario": "scenario", "judge": "judge", "cluster": "cluster profile", "encoder": "encoder",
               "tracking": "tracking", "judge_panel": "judge panel"}
_KEY = re.compile(r"[A-Za-z_][\w\-]*(?:[./][\w\-]+)*(?:@[\w.\-]*)?")
_PAIRS = {"[": "]", "{": "}", "(": ")"}
_MAIN_KEYS = "ragscale run --help lists the main keys"
_SWEEP_FUNCTION = re.compile(r"(choice|range|glob|interval)\(")


def normalize(overrides: Sequence[str]) -> list[str]:
    """The overrides with the shorthands spelled out: ``metrics=[a,b]`` (or ``metrics=a``) is
    ``select=[a,b]``, ``slices=[a,b]`` is ``slices.by=[a,b]``, ``input.columns.<field>=NAME`` is
    ``columns.<field>=NAME``."""
    out = []
    for o in overrides:
        key, eq, value = o.partition("=")
        bare = key.lstrip("+~")
        prefix = key[:len(key) - len(bare)]
        if eq and bare == "metrics":
            v = value.strip()
            o = f"{prefix}select=" + (v if v.startswith("[") or _SWEEP_FUNCTION.match(v) else f"[{v}]")
        elif eq and bare == "slices":
            v = value.strip()
            o = f"{prefix}slices.by=" + (v if v.startswith("[") or _SWEEP_FUNCTION.match(v) else f"[{v}]")
        elif eq and (bare == "input.columns" or bare.startswith("input.columns.")):
            o = f"{prefix}{bare[len('input.'):]}={value}"
        out.append(o)
    return out


def compose(overrides: Sequence[str]) -> Any:
    """Compose the config as the CLI does (the Python API, tests and benchmarks too): the
    overrides normalised, a ``+key`` that the schema does not know refused (Hydra would add it)."""
    from hydra import compose as _compose
    from hydra import initialize_config_dir

    from ragscale.config import register

    overrides = normalize(overrides)
    for o in overrides:
        key, eq, _ = o.partition("=")
        if eq and key.startswith("+") and key.lstrip("+").split("@")[0] not in GROUP_NOUNS:
            problem = key_problem(key.lstrip("+"), o, added=True)
            if problem:
                raise UserError(problem)
    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return _compose(config_name="config", overrides=overrides)


@functools.lru_cache(maxsize=None)
def group_options(group: str) -> dict[str, str]:
    """The options of a config group (ragscale/conf/<group>/*.yaml) with a one-line description
    each: the first sentence of the file's leading comment, or the first of its shorter forms
    (up to ': ', without parentheses, up to ', ') of 20 to 80 characters."""
    folder = os.path.join(CONF_DIR, group)
    out = {}
    for name in sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml")):
        lines = []
        with open(os.path.join(folder, name + ".yaml"), encoding="utf-8") as fh:
            for line in fh:
                if not line.startswith("#"):
                    break
                if not line.startswith("# @package"):
                    lines.append(line[1:].strip())
        text = " ".join(lines)
        first = re.split(r"(?<=[.!?])(?<!e\.g\.)(?<!i\.e\.)\s", text, maxsplit=1)[0].rstrip(".")
        bare = re.sub(r"\s*\([^()]*\)", "", first)
        fits = [t for t in (first, first.split(": ")[0], bare, bare.split(": ")[0], bare.split(", ")[0])
                if 20 <= len(t) <= 80]
        out[name] = fits[0] if fits else first[:79] + "…"
    return out


# -- the schema (ragscale/config.py), read for keys and their types -------------------------
def _unwrap(t: Any) -> Any:
    if get_origin(t) is Union:
        args = [a for a in get_args(t) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return t


def _children(t: Any) -> dict[str, Any] | None:
    """A structured node's keys and their types; None for a mapping, a list or a value."""
    if not is_dataclass(t):
        return None
    hints = get_type_hints(t)
    out = {}
    for f in fields(t):
        ft = _unwrap(hints[f.name])
        if ft is Any and f.default_factory is not MISSING and is_dataclass(f.default_factory):
            ft = f.default_factory  # columns: a dataclass made from ragscale/columns.py
        out[f.name] = ft
    return out


def _root() -> Any:
    from ragscale.config import RagscaleConf  # hydra's ConfigStore: imported when needed
    return RagscaleConf


def _type_at(key: str) -> Any:
    t = _root()
    for part in re.sub(r"\[\d+\]$", "", key).split("."):
        kids = _children(t)
        if kids is None or part not in kids:
            return None
        t = kids[part]
    return t


def _all_keys(t: Any = None, prefix: str = "") -> list[str]:
    out = []
    for k, kt in (_children(_root() if t is None else t) or {}).items():
        out.append(prefix + k)
        out.extend(_all_keys(kt, f"{prefix}{k}.") if is_dataclass(kt) else [])
    return out


def _suggest(parts: list[str], i: int, kids: dict[str, Any]) -> list[str]:
    """The keys the user may have meant when ``parts[i]`` is not among ``kids``: the closest
    sibling, or (at the top) the keys anywhere whose last part is closer (``k_values``)."""
    near = closest(parts[i], kids)
    found = [".".join([*parts[:i], near, *parts[i + 1:]])] if near else []
    if i:
        return found
    keys = _all_keys()
    last = closest(parts[0], [k.rsplit(".", 1)[-1] for k in keys if "." in k])
    if last and (near is None or ratio(parts[0], last) > ratio(parts[0], near)):
        found = [".".join([k, *parts[1:]]) for k in keys if k.rsplit(".", 1)[-1] == last]
    return found


def key_problem(key: str, override: str, added: bool = False) -> str | None:
    """What is wrong with setting ``key`` (None when the schema has it): an unknown key with the
    closest one, a new key of a mapping that needs ``+`` (``added``: it has one), or, for a
    removal (``~key``), a mapping's key that is not there."""
    parts, t = key.split("."), _root()
    for i, part in enumerate(parts):
        kids = _children(t)
        if kids is None:
            if (get_origin(t) is dict or t is dict) and override.startswith("~"):
                return f"{key} is not set: ~ removes only a key the config has"
            if (get_origin(t) is dict or t is dict) and not added:
                return f"use +{override.lstrip('+')} ({'.'.join(parts[:i])} takes new keys with +)"
            return None
        if part not in kids:
            near = [repr(k) for k in _suggest(parts, i, kids)]
            hint = f"did you mean {' or '.join([', '.join(near[:-1]), near[-1]] if len(near) > 1 else near)}?"
            return f"unknown key {key!r} ({hint if near else _MAIN_KEYS})"
        t = kids[part]
    return None


def _type_phrase(key: str, t: Any) -> str:
    if get_origin(t) is list:
        elem = _unwrap(get_args(t)[0]) if get_args(t) else Any
        return "a list of integers ([1,2])" if elem is int else "a list ([a,b])"  # (no key is a list of numbers)
    if is_dataclass(t):
        return f"a group of keys (e.g. {key}.{next(iter(_children(t)))}=...)"
    if get_origin(t) is dict or t is dict:
        return "a mapping ({x: 1})"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(t, "another value")


def type_problem(key: str, overrides: Sequence[str], value: str | None = None) -> str | None:
    """``<key> must be <type>, got '<value>'`` for a key of the schema (None for another key)."""
    t = _type_at(key)
    if t is None:
        return None
    base = re.sub(r"\[\d+\]$", "", key)
    if get_origin(t) is list and get_args(t) and is_dataclass(get_args(t)[0]):
        return None  # judge_panel: its entries come from +judge_panel=NAME
    given = _given(base, overrides)[1]
    return f"{base} must be {_type_phrase(base, t)}, got {value if given == '...' else given!r}"


def option_problem(group: str, value: str) -> str | None:
    """An unknown option of a config group, with the closest one and the list (None: known)."""
    options = group_options(group)
    if value in options:
        return None
    near = closest(value, options)
    return (f"unknown {GROUP_NOUNS[group]} {value!r}{f' (did you mean {near!r}?)' if near else ''}; "
            f"available: {', '.join(options)}")


def malformed(override: str) -> str | None:
    """Why Hydra cannot parse an override (None: it can), in one line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    key, eq, value = override.partition("=")
    start = f"malformed override {override!r}: "
    if not eq or not key.lstrip("+~"):
        if key.startswith("~") and not eq and _KEY.fullmatch(key.lstrip("~")):
            return None
        return start + "expected key=value (e.g. limit=3)"
    try:
        OverridesParser.create().parse_override(override)
        return None
    except Exception:  # noqa: BLE001 - Hydra's parser raises its own HydraException
        pass
    if not _KEY.fullmatch(key.lstrip("+~")):
        return start + "a key is names joined by dots (e.g. judge.model=...)"
    stack, quote = [], None
    for ch in value:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _PAIRS:
            stack.append(_PAIRS[ch])
        elif ch in _PAIRS.values() and (not stack or stack.pop() != ch):
            return start + "unbalanced brackets"
    if quote:
        return start + "unbalanced quotes"
    if stack:
        return start + "unbalanced brackets"
    if value.lstrip().startswith(("[", "{")):
        return start + "a list is written [a,b], a mapping {x: 1}"
    return start + f"quote a value with special characters ({key}='{value}')"


def _pairs(overrides: Sequence[str]) -> list[tuple[str, str]]:
    """(key without +/~ and @package, value) of each key=value override."""
    return [(k.lstrip("+~").split("@")[0], v) for k, eq, v in (o.partition("=") for o in overrides) if eq]


def _given(key: str, overrides: Sequence[str]) -> tuple[str, str]:
    """(the last override of ``key``, its value), whatever its prefix (+, ~) or @package."""
    for o in reversed(overrides):
        k, eq, v = o.partition("=")
        if eq and k.lstrip("+~").split("@")[0] == key:
            return o, v
    return f"{key}=...", "..."


def _no_plus(m: re.Match, exc: BaseException, overrides: Sequence[str]) -> str | None:
    group, value = m[1], _given(m[1], overrides)[1]
    if group not in PLUS_GROUPS:
        return None
    return option_problem(group, value) or f"use +{group}={value} ({PLUS_GROUPS[group]} is added with +)"


def _bad_key(m: re.Match, exc: BaseException, overrides: Sequence[str]) -> str:
    key = m[1].lstrip("+~").split("@")[0]
    return key_problem(key, _given(key, overrides)[0]) or f"cannot set {m[1]!r} ({_MAIN_KEYS})"


def _bad_type(m: re.Match, exc: BaseException, overrides: Sequence[str]) -> str | None:
    cause = exc.__cause__ or exc.__context__
    key = getattr(cause, "full_key", None) or m[1].lstrip("+~")
    value = re.search(r"Value '(.*?)' (?:of type|is not)", str(cause))
    return type_problem(key, overrides, value[1] if value else m[2])


def _twice(m: re.Match, exc: BaseException, overrides: Sequence[str]) -> str:
    group = m[1]
    added = [v for k, _, v in (o.partition("=") for o in overrides) if k == f"+{group}"]
    if group not in PLUS_GROUPS and added:
        return f"use {group}={added[-1]} ({group} has a default: + adds only a scenario or a judge panel)"
    values = list(dict.fromkeys(v for k, v in _pairs(overrides) if k == group))
    sweep = f" (-m +{group}={','.join(values)} runs each)" if len(values) > 1 else ""
    return f"{group} given twice: use one +{group}=NAME{sweep}"


def _no_name(m: re.Match, exc: BaseException, overrides: Sequence[str]) -> str | None:
    bad = next((k for k, v in _pairs(overrides) if k in GROUP_NOUNS and v.strip() in ("", "null")), None)
    return f"{bad} needs a name; available: {', '.join(group_options(bad))}" if bad else None


def _sweep(m: re.Match, exc: BaseException, overrides: Sequence[str]) -> str:
    key, _, value = m[1].partition("=")
    hint = f" (a list is written {key}=[{value}])" if "Ambiguous" in m[0] else ""
    return f"{m[1]} is a sweep: add -m to run one job per value{hint}"


# the first line of Hydra's message -> the line the user reads (None: the next rule, then the generic one)
_HYDRA_MESSAGES = (
    (r"Could not override '(.+?)'\. No match in the defaults list", _no_plus),
    (r"Could not override '(.+?)'\.", _bad_key),
    (r"Could not delete from config\. '(.+?)' does not exist",
     lambda m, e, o: key_problem(m[1], f"~{m[1]}") or f"{m[1]} cannot be removed: set it instead ({m[1]}=null)"),
    (r"Could not append to config\. An item is already at '(.+?)'",
     lambda m, e, o: f"{m[1]} is already set: use {m[1]}={_given(m[1], o)[1]} (without +)"),
    (r"Error merging override (.+?)=(.*)", _bad_type),
    (r"Ambiguous value for argument '(.+)'$", _sweep),  # the whole override, quotes and all
    (r"Sweep parameters '(.+?)' requires --multirun", _sweep),
    (r"Multiple values for (\w+)\.", _twice),
    (r"(\w+) appears more than once in the final defaults list", _twice),
    (r"In '.*?': Could not (?:find|load) '(\w+)/(.+?)'",  # ragscale's groups; Hydra's own (hydra/...): generic
     lambda m, e, o: option_problem(m[1], m[2]) if m[1] in GROUP_NOUNS else None),
    (r"Config group override must be a string or a list", _no_name),
)


def explain(exc: BaseException, overrides: Sequence[str]) -> str:
    """One line in the user's words for an error raised while composing ``overrides`` (a
    UserError's own message; Hydra's and OmegaConf's translated, never their text or an internal
    class name). The CLI, ``ragscale.evaluate`` and ``ragscale prompts`` print this line."""
    if isinstance(exc, UserError):
        return str(exc)
    overrides = normalize(overrides)
    problem = next(filter(None, map(malformed, overrides)), None)
    if problem:
        return problem
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    for pattern, rule in _HYDRA_MESSAGES:
        m = re.match(pattern, first)
        line = rule(m, exc, overrides) if m else None
        if line:
            return line
    first = re.sub(r"\b\w+_schema\b|'?\b[A-Z]\w*Conf\b'?", "the configuration", first)
    return f"invalid configuration: {first} (docs/configuration.md)"


def check_overrides(overrides: Sequence[str]) -> Any:
    """Refuse secrets, then compose once, so that a bad override is one line (``explain``)
    instead of Hydra's report, and a secret in a config file or in what a value resolves to is
    refused (``ragscale.secrets.check_config``). Returns the composed config."""
    refuse_secrets(overrides)
    try:
        cfg = compose(list(overrides))
    except Exception as e:  # noqa: BLE001 - Hydra/OmegaConf raise several exception types
        raise UserError(explain(e, overrides)) from None
    check_config(cfg)  # a key or ${oc.env:...} in a conf/*.yaml file, or a value that resolves to a key
    return cfg


def check_sweep(overrides: Sequence[str], max_composes: int = 32) -> None:
    """``-m``: secrets refused in every value, then each value of each swept key composed (the
    other keys at their first value), so that a typo anywhere in a sweep is the same one line,
    before Hydra writes multirun.yaml. Glob and interval sweeps are left to Hydra's sweeper."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    refuse_secrets(overrides)
    overrides = normalize(overrides)
    problem = next(filter(None, map(malformed, overrides)), None)
    if problem:
        raise UserError(problem)
    choices = []
    for o, parsed in zip(overrides, OverridesParser.create().parse_overrides(overrides)):
        try:
            choices.append([f"{parsed.get_key_element()}={v}" for v in parsed.sweep_string_iterator()]
                           if parsed.is_sweep_override() else [o])
        except Exception:  # noqa: BLE001 - glob/interval sweeps: expanded by Hydra's sweeper only
            continue
    first = [c[0] for c in choices]
    variants = [first] + [[*first[:i], v, *first[i + 1:]] for i, c in enumerate(choices) for v in c[1:]]
    for variant in variants[:max_composes]:
        check_overrides(variant)
