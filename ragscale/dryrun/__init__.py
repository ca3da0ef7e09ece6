"""``ragscale prompts``: a dry run that writes every prompt a run would send to its judge engine,
with its token count and cost (issue 17, item 3; docs/prompts.md). The command line is
ragscale.commands.prompts; this package is what it calls: ``judges`` drives the judge stages and
totals, ``actor`` is their judge actor with a recorder for an engine, ``synthetic`` the answers that
stand in for outputs not generated yet, ``tokens`` the counts.

    ragscale prompts +scenario=mtrag judge.protocol=reference --out prompts.jsonl --price-in 0.15 --price-out 0.60

Nothing here re-implements the run: the config is planned by ``ragscale.plan.plan_run``, the records
are selected by the driver's scan (sweep order, ``limit``) and read by the pipeline's first stage
(``ragscale.pipeline.cpu_stages.load_and_lexical``), and the judging is the judge actor's own code
(``ragscale.actors.judge.JudgeActor``: phases, rounds, fan-outs, the judge cache, identical cache keys
of a round generated once, re-asks), in batches of the judge pool's batch size, with two things
swapped: its engine is a recorder (``make_engine``, overridden) and its cache is a read-only view
of the judge cache plus the prompts this dry run has already "sent". No engine is loaded, no Ray
started, the judge cache is not written.

A prompt is *sent* when its cache key is neither in the judge cache, nor sent earlier in the dry run
(a later batch of a run finds it in the cache), nor the duplicate of another prompt of its round. A
cached output is followed as the run would follow it: its parsed value feeds the judge's next round,
and a cached output that does not parse is re-asked as the actor re-asks (``reask_sampling``).

Rounds that need outputs not generated yet (RAGAS faithfulness' verdicts need its statements;
nuggets' importance and assignment need the created nuggets; nuggets read UMBRELA's grades) cannot
be rendered. Their judge is driven on with a synthetic output instead, read by the step's own parser
whatever the protocol (``SYNTHETIC``, documented in docs/prompts.md: statements = the answer's
sentences, every UMBRELA grade 3, nuggets = the answer's sentences and a creation that then stops,
every nugget vital), and every prompt rendered after one is ``estimated: true``. A judge without a
synthetic rule ends at its first uncached answer: right for the single-round judges, whose only
round is then already counted.

Deliberate limits: re-asks after parse failures of outputs not generated yet cannot be foreseen (not
counted); a judge pool of several actors may generate a prompt twice when two batches holding it run
at once (counted once here, as one actor does); the output directory's finished records (a resumed
run) are not looked at: with the judge cache kept, their prompts are cache hits anyway.

Prompt tokens are counted with the judge model's own tokenizer where it is local (a llama.cpp GGUF:
llama-cpp-python's chat handler on a vocabulary-only model, the very code that tokenizes the run's
prompts; a vLLM model folder: its chat template and tokenizer), else estimated as characters / 4.
Expected completion tokens: the mean of the judge's outputs in the judge cache when this dry run met
some, else the judge's ``JudgeSpec.completion_tokens`` (capped at the prompt's ``max_tokens``).
"""

from __future__ import annotations

from ragscale.dryrun.judges import DryJudges, DryRun, JudgeTotals, cost, dry_run, format_table
from ragscale.dryrun.synthetic import UMBRELA_GRADE, sentences
from ragscale.dryrun.tokens import CHARS_PER_TOKEN, DEFAULT_COMPLETION_TOKENS, TokenCounter, completion_tokens

__all__ = ["CHARS_PER_TOKEN", "DEFAULT_COMPLETION_TOKENS", "DryJudges", "DryRun", "JudgeTotals", "completion_tokens",
           "TokenCounter", "UMBRELA_GRADE", "cost", "dry_run", "format_table", "sentences"]
