"""Secrets are refused before anything is written (issue 33, item 3; docs/security.md).

Every form of a secret a user can put in a run's configuration is planted, one at a time, through
``ragscale run`` (a single run and ``-m``), ``ragscale prompts`` (the dry run) and
``ragscale.evaluate`` (its overrides, its ``judge=`` dict and its ``column_map``), each in a
subprocess with its own folder, ragscale's cache folder (RAGSCALE_CACHE_DIR) and MLflow tracking to
a sqlite store in that folder. Each refusal must be one line on stderr with exit code 2 (evaluate:
a UserError of one line) that does not show the value, and must come before anything is written:
no output directory, no ``.hydra/``, no ``multirun.yaml``, no cache, no MLflow store, no prompts
file, and the planted value in no file of the folder and not in stdout/stderr.

The forms: keys of known shapes (OpenAI ``sk-``/``sk-proj-``, Azure's 32 hex digits, Bearer tokens,
JWTs, AWS access key ids and secret keys, GitHub, Hugging Face, Slack, Google), keys and headers
named like credentials in any case and spelling (``api-key``, ``X-Api-Key``, ``Cookie``,
``Authorization``, ``password``, ``passwd``, ``client_secret``, ``credential``, ``x-auth-token``),
URLs with user info or a key in their query (judge.options.base_url, tracking.uri,
relevancy.base_url, input), interpolations that read the environment (``${oc.env:...}``, whose
value would be copied into run.json, the report, the resume state and MLflow), a mapping
value with a credential key, a sweep with one secret value, and a judge config file the user adds
(hydra.searchpath) that holds a key or reads the environment.
"""

from __future__ import annotations

import json
import os
import secrets as _random
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.integration

RAGSCALE = os.path.join(os.path.dirname(sys.executable), "ragscale")


def _tag(n: int = 12) -> str:
    return _random.token_hex(n // 2 + 1)[:n]


def _b64(n: int) -> str:
    """``n`` random characters of an AWS secret key's alphabet (upper, lower, digits, / and +)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+"
    s = "".join(_random.choice(alphabet) for _ in range(n - 3))
    return "Ab3" + s  # at least one of each class


def _alnum(n: int) -> str:
    return "".join(_random.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))


HEX32 = _random.token_hex(16)
ENV_KEY = f"sk-proj-{_alnum(40)}"  # $RAGSCALE_PLANTED_KEY: read by ${oc.env:...}
ENV_PLAIN = f"plainenvvalue{_tag()}"  # $RAGSCALE_PLANTED_PLAIN: no key's shape, read all the same
JWT = f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{_alnum(20)}.{_alnum(30)}"
OPENAI = "judge=openai"  # the OpenAI-compatible engine's options (base_url, extra_headers) exist
# a user's judge config files (hydra.searchpath=[file://DIR] judge=NAME): written per test
CONF_FILES = {
    "keyfile": f"defaults:\n  - local\n  - _self_\nname: keyfile\noptions:\n  api_key: plainfilekey{_tag()}\n",
    "envfile": "defaults:\n  - local\n  - _self_\nname: envfile\nmodel: ${oc.env:RAGSCALE_PLANTED_PLAIN}\n",
}
PLANTED_IN_FILES = {"keyfile": CONF_FILES["keyfile"].split("api_key: ")[1].strip(), "envfile": ENV_PLAIN}

# id -> (overrides, the planted values that must appear nowhere)
FORMS: dict[str, tuple[list[str], list[str]]] = {}


def form(name: str, overrides: list[str], *planted: str) -> None:
    FORMS[name] = (overrides, list(planted))


_v = {k: f"{k}{_tag()}" for k in ("xapikey", "cookie", "password", "passwd", "secret", "cred", "token", "apikey",
                                  "awsname", "bearer", "url", "trk", "rel", "inp")}
form("sk", [f"+judge.options.api_key=sk-{_alnum(32)}"])
form("sk-proj", [f"judge.model=sk-proj-{_alnum(48)}"])
form("azure-hex-header", [OPENAI, f"+judge.options.extra_headers.api-key={HEX32}"], HEX32)
form("azure-hex-value", [f"+judge.options.extra_body.deployment_secret_like={HEX32}"], HEX32)
form("X-Api-Key", [OPENAI, f"+judge.options.extra_headers.X-Api-Key={_v['xapikey']}"], _v["xapikey"])
form("Cookie", [OPENAI, f"+judge.options.extra_headers.Cookie=session{_v['cookie']}"], _v["cookie"])
form("Authorization", [OPENAI, f"+judge.options.extra_headers.Authorization=Bearer {_v['bearer']}"], _v["bearer"])
form("bearer-value", [f"+judge.options.extra_body.note=Bearer {_v['bearer']}9"], _v["bearer"])
form("jwt", [f"+judge.options.extra_body.user={JWT}"], JWT)
form("aws-access-key", [f"+judge.options.extra_body.aws=AKIA{_alnum(16).upper()}"])
form("aws-secret-key", [f"+judge.options.extra_body.blob={_b64(40)}"])
form("aws-secret-named", [f"+judge.options.aws_secret_access_key={_v['awsname']}"], _v["awsname"])
form("github", [f"judge.model=ghp_{_alnum(36)}"])
form("huggingface", [f"judge.model=hf_{_alnum(34)}"])
form("slack", [f"+judge.options.extra_body.s=xoxb-{_alnum(12)}-{_alnum(24)}"])
form("google", [f"judge.model=AIza{_alnum(35)}"])
form("password", [f"+judge.options.password={_v['password']}"], _v["password"])
form("passwd", [f"+judge.options.PASSWD={_v['passwd']}"], _v["passwd"])
form("client_secret", [f"+judge.options.client_secret={_v['secret']}"], _v["secret"])
form("credential", [f"+judge.options.credential={_v['cred']}"], _v["cred"])
form("x-auth-token", [OPENAI, f"+judge.options.extra_headers.x-auth-token={_v['token']}"], _v["token"])
form("Api_Key", [f"+judge.options.Api_Key={_v['apikey']}"], _v["apikey"])
form("base_url-userinfo", [OPENAI, "judge.model=gpt-4o-mini",
                           f"judge.options.base_url=http://user:{_v['url']}@127.0.0.1:9/v1"], _v["url"])
form("base_url-query-key", [OPENAI, "judge.model=gpt-4o-mini",
                            f"judge.options.base_url=http://127.0.0.1:9/v1?api-key={_v['url']}"], _v["url"])
form("tracking.uri-userinfo", [f"tracking.uri=http://u:{_v['trk']}@127.0.0.1:9"], _v["trk"])
form("relevancy.base_url-userinfo", [f"relevancy.base_url=http://u:{_v['rel']}@127.0.0.1:9/v1"], _v["rel"])
form("input-userinfo", [f"input=http://u:{_v['inp']}@127.0.0.1:9/data.jsonl"], _v["inp"])
form("oc.env-key", ["judge.model=${oc.env:RAGSCALE_PLANTED_KEY}"], ENV_KEY)
form("oc.env-plain", ["judge.model=${oc.env:RAGSCALE_PLANTED_PLAIN}"], ENV_PLAIN)
form("oc.env-inside", ["+judge.options.extra_body.user=team-${oc.env:RAGSCALE_PLANTED_PLAIN}"], ENV_PLAIN)
form("mapping", [OPENAI, f"judge.options.extra_headers={{api-key: {HEX32}}}"], HEX32)
form("sweep-value", [f"judge.model=gpt-4o-mini,sk-{_alnum(32)}"])
form("conf-file-key", ["hydra.searchpath=[file://{confdir}]", "judge=keyfile"], PLANTED_IN_FILES["keyfile"])
form("conf-file-env", ["hydra.searchpath=[file://{confdir}]", "judge=envfile"], ENV_PLAIN)


def _planted(name: str) -> list[str]:
    """The values to search for: those named, else the secret-shaped value of the override."""
    overrides, planted = FORMS[name]
    if planted:
        return planted
    value = overrides[-1].split("=", 1)[1]
    return [value.split(",")[-1]]


def _folder(tmp_path) -> dict:
    confdir = tmp_path / "userconf"
    (confdir / "judge").mkdir(parents=True)
    for conf, text in CONF_FILES.items():
        (confdir / "judge" / f"{conf}.yaml").write_text(text)
    env = {**os.environ, "RAGSCALE_CACHE_DIR": str(tmp_path / "cache"), "RAGSCALE_PLANTED_KEY": ENV_KEY,
           "RAGSCALE_PLANTED_PLAIN": ENV_PLAIN, "PYTHONPATH": os.pathsep.join(filter(None, (ROOT, os.environ.get(
               "PYTHONPATH")))), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow-env.db"}
    return {"confdir": str(confdir), "env": env, "out": str(tmp_path / "out")}


def _base(tmp_path, where: dict) -> list[str]:
    return ["+scenario=custom", "limit=1", f"output_dir={where['out']}", "tracking=mlflow",
            f"tracking.uri=sqlite:///{tmp_path}/mlflow.db"]


def _overrides(name: str, where: dict) -> list[str]:
    return [o.replace("{confdir}", where["confdir"]) for o in FORMS[name][0]]


def _written(tmp_path) -> list[str]:
    """Every file under the folder but the user's config files."""
    return sorted(os.path.relpath(os.path.join(d, f), tmp_path) for d, _, files in os.walk(tmp_path)
                  for f in files if not os.path.relpath(d, tmp_path).startswith("userconf"))


def _leaks(tmp_path, planted: list[str], text: str) -> list[str]:
    found = [f"output: {p}" for p in planted if p in text]
    for rel in _written(tmp_path):
        data = open(os.path.join(tmp_path, rel), "rb").read()
        found += [f"{rel}: {p}" for p in planted if p.encode() in data]
    return found


MODES = {
    "run": lambda base, o, tmp: [RAGSCALE, "run", *base, *o],
    "run -m": lambda base, o, tmp: [RAGSCALE, "run", "-m", *base, "judge.seed=1,2", *o],
    "prompts": lambda base, o, tmp: [RAGSCALE, "prompts", *base, *o, "--out", str(tmp / "prompts.jsonl")],
}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", list(FORMS))
def test_a_planted_secret_is_refused_in_one_line_before_anything_is_written(tmp_path, name, mode):
    where = _folder(tmp_path)
    cmd = MODES[mode](_base(tmp_path, where), _overrides(name, where), tmp_path)
    res = subprocess.run(cmd, cwd=tmp_path, env=where["env"], capture_output=True, text=True, timeout=300)
    planted = _planted(name)
    assert not _leaks(tmp_path, planted, res.stdout + res.stderr), (_leaks(tmp_path, planted, res.stdout + res.stderr),
                                                                     res.stdout[-1500:], res.stderr[-1500:])
    assert res.returncode == 2, (res.returncode, res.stdout[-1500:], res.stderr[-1500:])
    prog = "ragscale prompts" if mode == "prompts" else "ragscale run"
    assert res.stdout == "" and res.stderr.count("\n") == 1, (res.stdout[-1500:], res.stderr)
    assert res.stderr.startswith(f"{prog}: error: refusing "), res.stderr
    assert _written(tmp_path) == [], _written(tmp_path)  # no output dir, .hydra, cache, MLflow store


EVALUATE = """
import json, os, sys
import ragscale
from ragscale.errors import UserError
for n, (name, kind, arg) in enumerate(json.loads(sys.argv[1])):
    folder = os.path.abspath(str(n))
    base = ["limit=1", "tracking=mlflow", f"tracking.uri=sqlite:///{folder}/mlflow.db"]
    kwargs = {"overrides": [*base, *arg]} if kind == "overrides" else {"overrides": base, kind: arg}
    try:
        ragscale.evaluate(None, scenario="custom", output_dir=os.path.join(folder, "out"), **kwargs)
        print("ACCEPTED", name, flush=True)
    except UserError as e:
        print("REFUSED", name, e, flush=True)
"""

# evaluate's judge= settings and column_map: the same forms, as Python values
EVALUATE_ARGS = {
    "judge-api-key": ("judge", {"name": "openai", "model": "gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1",
                                "extra_headers": {"api-key": HEX32}}, [HEX32]),
    "judge-X-Api-Key": ("judge", {"name": "openai", "extra_headers": {"X-Api-Key": _v["xapikey"]}}, [_v["xapikey"]]),
    "judge-Cookie": ("judge", {"name": "openai", "extra_headers": {"Cookie": "s=" + _v["cookie"]}}, [_v["cookie"]]),
    "judge-base_url-userinfo": ("judge", {"name": "openai", "model": "gpt-4o-mini",
                                          "base_url": f"http://user:{_v['url']}@127.0.0.1:9/v1"}, [_v["url"]]),
    "judge-oc.env": ("judge", {"name": "local", "model": "${oc.env:RAGSCALE_PLANTED_KEY}"}, [ENV_KEY]),
    "judge-oc.env-plain": ("judge", {"name": "openai", "model": "${oc.env:RAGSCALE_PLANTED_PLAIN}"}, [ENV_PLAIN]),
    "judge-jwt": ("judge", {"name": "openai", "extra_body": {"user": JWT}}, [JWT]),
    "column_map-key": ("column_map", {"answer": f"sk-{_alnum(32)}"}, None),
    "column_map-oc.env": ("column_map", {"answer": "${oc.env:RAGSCALE_PLANTED_PLAIN}"}, [ENV_PLAIN]),
}


def test_evaluate_refuses_every_form_before_anything_is_written(tmp_path):
    """Every form above as ``evaluate``'s overrides, and the judge= and column_map forms: one
    process, each call with its own output_dir and MLflow store (the cache folder shared)."""
    where = _folder(tmp_path)
    cases = [(f"overrides:{n}", "overrides", _overrides(n, where), _planted(n)) for n in FORMS]
    cases += [(n, kind, arg, planted or [arg["answer"]]) for n, (kind, arg, planted) in EVALUATE_ARGS.items()]
    res = subprocess.run([sys.executable, "-c", EVALUATE, json.dumps([c[:3] for c in cases])],
                         cwd=tmp_path, env=where["env"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and res.stderr == "", res.stderr[-3000:]
    lines = res.stdout.splitlines()
    assert [line.split(" ", 2)[:2] for line in lines] == [["REFUSED", c[0]] for c in cases], res.stdout[-3000:]
    for (name, _, _, planted), line in zip(cases, lines):
        assert line.split(" ", 2)[2].startswith("refusing "), line
        assert not [p for p in planted if p in line], name
    assert not _leaks(tmp_path, [p for c in cases for p in c[3]], res.stdout + res.stderr)
    assert _written(tmp_path) == [], _written(tmp_path)
