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
#   c. ragscale.evaluate(DataFrame, scenario="custom", ...).to_pandas()   (Python API)
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

# --- c. Python API ---------------------------------------------------------------------------
log "c. ragscale.evaluate(DataFrame, scenario=\"custom\") -> Run.to_pandas()"
"$VPY" - "$WORK/out3" <<'EOF' || fail "c. Python API snippet failed"
import sys
import pandas as pd
import ragscale

df = pd.DataFrame([
    {"user_input": "What is the capital of France?", "response": "Paris",
     "reference": "Paris", "retrieved_contexts": ["Paris is the capital of France."], "model_id": "m1"},
    {"user_input": "How many legs does a spider have?", "response": "A spider has 8 legs.",
     "reference": "Spiders have eight legs.", "retrieved_contexts": ["Spiders are arachnids with 8 legs."],
     "model_id": "m1"},
    {"user_input": "Who wrote Hamlet?", "response": "Christopher Marlowe",
     "reference": "William Shakespeare", "retrieved_contexts": ["Hamlet is a tragedy by William Shakespeare."],
     "model_id": "m2"},
])
run = ragscale.evaluate(df, scenario="custom",
                        overrides=["custom.expectations=null", "metrics.custom=[exact_match,keyword_coverage]"],
                        output_dir=sys.argv[1])
out = run.to_pandas()
assert len(out) == len(df), f"to_pandas() has {len(out)} rows for {len(df)} input records"
assert "exact_match" in out.columns, f"no exact_match column in {list(out.columns)}"
print(f"[wheel] c. ok: {len(out)} rows; exact_match = {out['exact_match'].tolist()}")
EOF

# --- notebook-style API check -----------------------------------------------------------------
# (reserved: the notebook-style script of issue 32 goes here: a ragas-style DataFrame with its own
# column names and column_map, metrics by name, to_pandas() with the inputs, ragscale.metrics())

MODELS_SIZE=$(venv_size)
log "venv sizes: the core (pip install ragscale) $CORE_SIZE; with the models extra $MODELS_SIZE"
log "all checks passed"
