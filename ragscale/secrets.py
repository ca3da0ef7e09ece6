"""What a secret looks like, defined once (docs/security.md, "API keys").

Three tests, which every check and every redaction reads:

- ``SHAPES``: a value, or part of one, of a key's or token's shape (OpenAI/Anthropic ``sk-``,
  ``sk-proj-``, Azure's 32 hex digits, Bearer/Basic credentials, JWTs, AWS access key ids and
  secret keys, GitHub, GitLab, Hugging Face, Slack, Google, npm tokens, PEM private keys) or a URL
  carrying credentials (``user:password@``, ``?api-key=...``): ``looks_like_secret``,
  ``redact_secret_shapes``;
- ``credential_name``: a key or header named like a credential (``api_key``, ``api-key``,
  ``X-Api-Key``, ``Authorization``, ``Cookie``, ``token``, ``password``, ``passwd``, ``secret``,
  ``credential``..., in any case, joined by ``-``, ``_`` or camelCase); ``api_key_env``, which names
  a variable, is not one;
- ``reads_environment``: an interpolation that reads the environment (``${oc.env:NAME}``), whose
  value would be copied into run.json, the report, the resume state and MLflow.

``refuse_secrets`` applies them to the overrides (before Hydra writes ``.hydra/`` or
``multirun.yaml``), ``check_config`` to a composed config, raw and resolved (ragscale.overrides,
ragscale.api, ``ragscale prompts``); ``ragscale.provenance.redact`` and the engines' error
redaction use ``credential_name`` and ``redact_secret_shapes``. A value is never shown.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, List, Sequence

from ragscale.errors import UserError

_RUN = re.compile(r"[A-Za-z0-9]{12,}")


def _random_run(text: str) -> bool:
    """A run of 12+ letters and digits that mixes two of upper case, lower case and digits (a
    random key body; ``cache_directory_for_models`` has none)."""
    return any(sum(bool(re.search(c, r)) for c in ("[A-Z]", "[a-z]", "[0-9]")) >= 2 for r in _RUN.findall(text))


def _random_40(text: str) -> bool:
    """An AWS secret access key's randomness: upper, lower and digits, changing class often."""
    cls = [0 if c.isupper() else 1 if c.islower() else 2 if c.isdigit() else 3 for c in text]
    return {0, 1, 2} <= set(cls) and sum(a != b for a, b in zip(cls, cls[1:])) >= 12


_TOKEN_START, _TOKEN_END = r"(?<![^\s'\"=:,;(\[{<])", r"(?![^\s'\"=:,;)\]}>])"  # a whole word of the text
# (what, pattern, extra test of the match or None); the match (its group "s" where there is one) is
# the secret itself: redaction replaces it by ***
SHAPES: tuple[tuple[str, re.Pattern, Callable[[str], bool] | None], ...] = tuple(
    (what, re.compile(pattern, flags), test) for what, pattern, flags, test in (
        ("an API key: sk-, hf_, ghp_, glpat-, xoxb-...",
         r"(?<![A-Za-z0-9])(?:sk|pk|rk|hf|ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abprse]|xapp|npm)[-_]"
         r"[A-Za-z0-9_\-]{16,}", re.I, _random_run),
        ("an AWS access key id", r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{16}"
         r"(?![A-Za-z0-9])", 0, None),
        ("a Google API key", r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{30,}", 0, None),
        ("a Google OAuth token", r"(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_\-]{20,}", 0, None),
        ("a JSON Web Token", r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]*", 0, None),
        ("a Bearer or Basic credential",
         r"\b(?:bearer|basic)\s+(?P<s>(?=[A-Za-z._~+/=\-]*\d)[A-Za-z0-9._~+/=\-]{8,})", re.I, None),
        ("a private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----", 0, None),
        ("a URL with user info, user:password@", r"(?<=://)(?P<s>[^\s/@?#]+)(?=@)", 0, None),
        ("a credential in a URL's query", r"[?&](?P<name>[^=&#\s]+)=(?P<s>[^&#\s]+)", 0, None),
        ("an Azure-style key of 32 hex digits", _TOKEN_START + r"(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{32}"
         + _TOKEN_END, re.I, None),
        ("an AWS secret access key of 40 characters", _TOKEN_START + r"[A-Za-z0-9/+]{40}" + _TOKEN_END, 0, _random_40),
    ))
_QUERY_NAMES = ("key", "sig", "signature", "code")  # URL query parameters that carry keys besides credential names
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# the last word of a credential's name; or a key qualified by the word before it (api_key, access_key)
_CREDENTIAL_WORDS = ("password", "passwd", "passphrase", "secret", "secrets", "token", "credential", "credentials",
                     "cookie", "cookies", "authorization", "apikey", "apikeys")
_KEY_QUALIFIERS = ("api", "access", "private", "secret", "subscription", "account", "signing", "session", "master",
                   "client", "encryption", "auth")
ENV_INTERPOLATION = re.compile(r"\$\{\s*(?:oc\.)?env\s*:")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(str(name))]


def credential_name(name: Any) -> bool:
    """Whether a key or header is named like a credential (its value is then a secret, whatever
    it looks like): ``api_key``, ``api-key``, ``X-Api-Key``, ``apiKey``, ``Authorization``,
    ``Cookie``, ``hf_token``, ``x-auth-token``, ``password``, ``PASSWD``, ``client_secret``,
    ``aws_secret_access_key``, ``credentials``... Not ``api_key_env`` (a variable's name),
    ``max_tokens``, ``tokenizer`` or ``token_budget``: the name's last word decides."""
    words = _words(name)
    if not words:
        return False
    last = words[-1]
    if last in _CREDENTIAL_WORDS or last.endswith(("token", "password", "passwd", "secret", "apikey")):
        return True
    return last in ("key", "keys") and len(words) > 1 and words[-2] in _KEY_QUALIFIERS


def _spans(text: str) -> Iterable[tuple[str, int, int]]:
    """(what, start, end) of each secret in ``text``."""
    for what, rx, test in SHAPES:
        for m in rx.finditer(text):
            if "name" in rx.groupindex and not (credential_name(m["name"]) or m["name"].lower() in _QUERY_NAMES):
                continue
            if test is None or test(m.group(0)):
                yield (what, *m.span("s" if "s" in rx.groupindex else 0))


def secret_kind(value: Any) -> str | None:
    """What secret ``value`` holds (``"a JSON Web Token"``...), None when it holds none."""
    return next((what for what, _, _ in _spans(value)), None) if isinstance(value, str) else None


def looks_like_secret(value: Any) -> bool:
    """Whether a string holds a key, a token or a URL's credentials (``SHAPES``)."""
    return secret_kind(value) is not None


def redact_secret_shapes(text: str) -> str:
    """``text`` with every secret that ``SHAPES`` finds replaced by ``***`` (a URL keeps its host)."""
    spans = sorted((s, e) for _, s, e in _spans(text))
    out, at = [], 0
    for s, e in spans:
        if s >= at:
            out += [text[at:s], "***"]
            at = e
    return "".join(out) + text[at:]


def reads_environment(value: Any) -> bool:
    """Whether a config value reads an environment variable (``${oc.env:NAME}``, ``${env:NAME}``)."""
    return isinstance(value, str) and ENV_INTERPOLATION.search(value) is not None


def looks_like_env_name(value: Any) -> bool:
    """Whether ``value`` can be the NAME of an environment variable and is not a key pasted
    in its place (a secret shape, or a long run of mixed letters and digits such as a
    32-character hex Azure key)."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", value):
        return False
    if looks_like_secret(value):
        return False
    return not any(len(seg) >= 16 and re.search(r"\d", seg) and re.search(r"[A-Za-z]", seg)
                   for seg in value.split("_"))


def filled(value: Any) -> bool:
    """A credential-named key's value that can hold a secret (not null, empty or a switch)."""
    return value not in (None, "", "null", {}, []) and not isinstance(value, bool)


def secret_paths(obj: Any, path: str = "") -> List[str]:
    """Dotted paths of the values in a (plain, nested) config that are or look like secrets: a
    string holding one of ``SHAPES``, or a filled value under a key named like a credential
    (``credential_name``). The values themselves are never returned."""
    out: List[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{path}.{k}" if path else str(k)
            if (credential_name(k) and filled(v)) or looks_like_secret(str(k)):
                out.append(p)
            else:
                out.extend(secret_paths(v, p))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.extend(secret_paths(v, f"{path}[{i}]"))
    elif looks_like_secret(obj):
        out.append(path or "<value>")
    return out


def environment_paths(obj: Any, path: str = "") -> List[str]:
    """Dotted paths of the values in a (plain, unresolved) config that read the environment."""
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in environment_paths(v, f"{path}.{k}" if path else str(k))]
    if isinstance(obj, (list, tuple)):
        return [p for i, v in enumerate(obj) for p in environment_paths(v, f"{path}[{i}]")]
    return [path or "<value>"] if reads_environment(obj) else []


def shown(path: str) -> str:
    """A config path as a message may show it (a path that itself looks like a secret is not shown)."""
    return "a key (not shown)" if looks_like_secret(path) else path


# -- the overrides, before Hydra writes them ------------------------------------------------------
def _parsed_values(arg: str) -> list[Any] | None:
    """The values of an override as Hydra parses them (every value of a sweep; a mapping as a
    dict), or None when Hydra cannot parse it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, Glob

    try:
        value = OverridesParser.create().parse_override(arg).value()
    except Exception:  # noqa: BLE001 - Hydra's parser raises its own exceptions; the text is checked anyway
        return None
    if isinstance(value, ChoiceSweep):
        return list(value.list)
    if isinstance(value, Glob):
        return [*value.include, *value.exclude]
    return [value]


_TAIL = "secrets are read from environment variables only (e.g. judge.options.api_key_env=MY_KEY_VAR)"
_ENV = ("(${oc.env:...}; not shown): what it reads would be written to run.json, the report and MLflow; give the "
        "value itself, and keys only through an api_key_env setting")


def _secret_why(key: str, value: str) -> str | None:
    """Why the value of ``key`` is a secret (named like one, of a secret's shape, in any value of a
    sweep or entry of a mapping, a key given as a variable's name), or None."""
    parts = key.split(".")
    text = [value, *(p.strip("'\"") for p in re.split(r"[,()\[\]{}\s]+", value) if p)]
    if any(credential_name(p) for p in parts) and value.strip() not in ("", "null", "true", "false"):
        return "named like a credential"
    what = next(filter(None, map(secret_kind, text)), None)
    if what:
        return what
    if parts[-1].endswith(("_env", "-env")) and credential_name(parts[-1][:-4]) and value and not all(
            looks_like_env_name(t) for t in (text[1:] or [value])):
        return "not the NAME of an environment variable"
    parsed = _parsed_values(f"{key}={value}") if "{" in value else None  # a mapping's keys: {api-key: ...}
    return "a key of the mapping is named like a credential" if parsed and secret_paths({"v": parsed}) else None


def override_problem(arg: str) -> tuple[str, str] | None:
    """(key, why) when a ``key=value`` argument carries a secret (``_secret_why``) or reads the
    environment (``reads_environment``, in any value of a sweep or a mapping); None otherwise.
    The key is "a key" when the key itself looks like a secret."""
    if "=" not in arg:
        return None
    key, _, value = arg.partition("=")
    key = key.lstrip("+~").split("@")[0]
    if looks_like_secret(key):
        return "a key", f"the key looks like a secret (not shown); {_TAIL}"
    why = _secret_why(key, value)
    if why:
        return key, f"its value is or looks like a secret ({why}; not shown); {_TAIL}"
    if reads_environment(value):
        return key, f"its value reads an environment variable {_ENV}"
    return None


def secret_override(arg: str) -> str | None:
    """The key of a ``key=value`` argument that carries a secret (``override_problem``); None otherwise."""
    problem = override_problem(arg)
    return problem[0] if problem else None


def refuse_secrets(overrides: Sequence[str], where: str = "on the command line") -> None:
    """UserError (one line, the value not shown) for the first override that carries a secret:
    checked before Hydra writes ``.hydra/``, ``multirun.yaml`` or its job lines."""
    for a in overrides:
        problem = override_problem(a)
        if problem is not None:
            raise UserError(f"refusing {problem[0]} {where}: {problem[1]}")


# -- a composed config, raw and resolved ------------------------------------------------------------
def _resolved(node: Any) -> Any:
    """A composed config as plain values, each interpolation resolved; one that cannot be resolved
    here (e.g. ``${hydra:...}`` outside a Hydra run) is left out."""
    from omegaconf import DictConfig, ListConfig

    if isinstance(node, DictConfig):
        keys, get = list(node.keys()), node.__getitem__
    elif isinstance(node, ListConfig):
        keys, get = range(len(node)), node.__getitem__
    else:
        return node
    out: dict = {}
    for k in keys:
        try:
            out[k] = _resolved(get(k))
        except Exception:  # noqa: BLE001 - resolvers raise their own exception types
            continue
    return out if isinstance(node, DictConfig) else [out[k] for k in keys if k in out]


def config_problem(cfg: Any) -> str | None:
    """Why a composed config (from overrides, config files the user added, ``evaluate``'s
    arguments) must not run, in one line, or None: a value that reads the environment, a value of
    a secret's shape or under a credential's name, or a value that resolves to a secret."""
    from omegaconf import OmegaConf

    raw = OmegaConf.to_container(cfg, resolve=False)
    found = environment_paths(raw)
    if found:
        return f"refusing to run: config value(s) {', '.join(map(shown, found))} read environment variables {_ENV}"
    found = secret_paths(raw) or secret_paths(_resolved(cfg))
    if found:
        return (f"refusing to run: config value(s) {', '.join(map(shown, found))} look like secrets (not shown); "
                "secrets are read from environment variables only")
    return None


def check_config(cfg: Any) -> None:
    """UserError (``config_problem``) when a composed config carries a secret."""
    problem = config_problem(cfg)
    if problem:
        raise UserError(problem)
