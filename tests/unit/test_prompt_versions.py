"""A judge's prompt changes only with its version (issue 37): the judge cache keys a generation by
the judge's prompt version and the rendered prompt, and run.json reports the version as what was
asked, so a prompt that changed under the same version would be a different question reported as
the same one. Every judge's prompts, rendered from fixed inputs (test_prompt_injection.RENDER), are
recorded here by digest (text, schema, max tokens, sampling) per version: a change of a prompt
without a new version fails. After bumping a version, record the new digests with
``RAGSCALE_RECORD_PROMPTS=1 pytest tests/unit/test_prompt_versions.py``."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from conftest import ROOT
from ragscale.judges import JUDGES
from test_prompt_injection import RENDER  # every judge's renderers (a test there holds that it has them all)

RECORDED = os.path.join(ROOT, "tests", "prompt_digests.json")
INPUT = "What is the capital of France? [1] Paris is the capital."


def digest(prompt) -> str:
    payload = json.dumps({"messages": list(prompt.messages), "schema": prompt.schema, "max_tokens": prompt.max_tokens,
                          "sampling": prompt.sampling, "params": [list(p) for p in prompt.params]}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def rendered() -> dict[str, dict]:
    return {name: {"version": JUDGES[name].version, "prompts": [digest(p) for p in RENDER[name][0](INPUT)]}
            for name in sorted(RENDER)}


def test_a_prompt_changes_only_with_its_version():
    now = rendered()
    if os.environ.get("RAGSCALE_RECORD_PROMPTS") == "1":
        with open(RECORDED, "w") as fh:
            json.dump(now, fh, indent=1, sort_keys=True)
            fh.write("\n")
        pytest.skip("recorded the prompts' digests")
    with open(RECORDED) as fh:
        recorded = json.load(fh)
    assert set(now) == set(recorded), "a judge was added or removed: record the digests (see the module docstring)"
    changed = [name for name in now if now[name]["prompts"] != recorded[name]["prompts"]
               and now[name]["version"] == recorded[name]["version"]]
    assert not changed, (f"the prompts of {', '.join(changed)} changed under the same version: bump the judge's "
                         "VERSION (cached generations and run.json carry it), then record the digests")
    stale = [name for name in now if now[name] != recorded[name]]
    assert not stale, f"new versions of {', '.join(stale)}: record their digests (see the module docstring)"
