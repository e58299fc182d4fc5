"""``RemarkGRPOConfig``: TRL's ``GRPOConfig`` plus the rank-level fields (the field definitions only).

Departures from TRL's defaults, on purpose:

- ``loss_type`` and ``scale_rewards`` have no default here: TRL changed both across versions (``bnpo`` was
  the default in trl 0.21, which Rank-GRPO used; ``dapo`` is the default in trl 1.x), so a run must say
  which it means. ``scale_rewards`` is kept equal to ``advantage_scaling`` (the per-rank scaling the
  trainer applies), so TRL's own logged scalar advantages use the same rule.
- Every rank-level option (reward scheme, K, matcher, sampling, filters, length shaping, rank-level
  ratio, validation, divergence guard) is a documented field, checked in ``__post_init__``
  (``remark.config.validate``) with an error that says what to change.
- The GRPO-family options TRL lacks (``advantage_baseline``, ``gmpo_level``, ``loss_aggregation``,
  ``truncation``, ``refill_batch``; ``remark.algos.family``) are fields too. Named recipes
  (``remark.recipes``) are sets of these fields, composed under a run file by ``remark.config.compose``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig

from remark.algos.registry import choices_help, describe, names, spec
from remark.config.lora import validate_lora
from remark.config.tracking import validate_tracking
from remark.config.validate import LOSS_TYPES, validate_remark_fields, validate_remark_layout


def _choices(lead: str, kind: str, tail: str = "") -> dict[str, str]:
    """A field's metadata whose help lists every registered name of ``kind`` with its one-line help."""
    return {"help": f"{lead} (registry kind '{kind}'): {choices_help(describe(kind))}.{tail}"}


@dataclass
class RemarkGRPOConfig(GRPOConfig):
    """GRPO with rank-level advantages. Fields below are remark's; the rest are TRL's ``GRPOConfig``."""

    # --- what to train on --------------------------------------------------------------------------
    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Model directory or hub id (a local directory when HF_HUB_OFFLINE=1)."},
    )
    data_dir: str | None = field(
        default=None,
        metadata={"help": "A pooled dataset directory written by `remark prep` (requests.parquet ...)."},
    )
    train_split: str = field(default="train", metadata={"help": "Split of requests.parquet to train on."})
    valid_split: str = field(default="valid", metadata={"help": "Split used by validation during training."})

    # --- rank rewards and advantages --------------------------------------------------------------
    reward_scheme: str = field(default="union", metadata=_choices("Per-rank reward", "reward"))
    log_decay: bool = field(
        default=False,
        metadata={"help": f"Apply the 'log_decay' modifier: {spec('modifier', 'log_decay').help}."},
    )
    advantage_scaling: str = field(default="group", metadata=_choices("Per-rank scaling s", "scale"))
    advantage_eps: float = field(default=1e-4, metadata={"help": "eps added to the std in 'group'/'batch'."})
    num_ranks: int = field(
        default=20, metadata={"help": "K: list length the policy is asked for and rewarded on."}
    )
    # grounding (catalog.match.GroundingSettings): None = the dataset's meta.json "grounding"; a value set
    # here overrides the dataset's for the reward and the validation, and is printed and recorded
    match_mode: str | None = field(
        default=None,
        metadata={
            "help": "Grounding of generated titles: 'exact' (Rank-GRPO), 'normalized' or 'fuzzy'; None = the "
            "dataset's (meta.json grounding)."
        },
    )
    year_tolerance: int | None = field(
        default=None,
        metadata={"help": "Years a title may be off and still match (+-); None = the dataset's."},
    )
    match_threshold: float | None = field(
        default=None, metadata={"help": "Fuzzy score threshold (0-100); None = the dataset's."}
    )
    match_scorer: str | None = field(
        default=None, metadata={"help": "rapidfuzz scorer of the fuzzy rule; None = the dataset's."}
    )
    sampling: str = field(
        default="uniform",
        metadata={
            "help": "'uniform': one row per request (ReMaRk); 'per_responder': one row per (request, responder), "
            "so a request with n responders is drawn n times as often (Rank-GRPO)."
        },
    )

    # --- filters and shaping ---------------------------------------------------------------------
    zero_signal_filter: bool = field(
        default=False,
        metadata={
            "help": "Drop groups whose G reward vectors are all equal from the loss (ScaleRL / Olmo 3)."
        },
    )
    pass_rate_drop: float | None = field(
        default=None,
        metadata={
            "help": "Drop requests for good once a group's pass rate reaches this (ScaleRL 0.9, Olmo 3 0.875)."
        },
    )
    overflow_penalty: float = field(
        default=-0.1, metadata={"help": "Advantage of every token of a line past K (Rank-GRPO: -0.1)."}
    )
    filler_penalty: float = field(
        default=-0.1,
        metadata={
            "help": "Advantage of every whitespace-only token outside the list's lines (blank lines, indentation). "
            "Rank-GRPO made blank lines slots; here they hold no rank, and at 0 a policy can drift into blank lines."
        },
    )
    eos_complete_bonus: float = field(
        default=0.1, metadata={"help": "End-token advantage when the list has K items (Rank-GRPO: +0.1)."}
    )
    eos_early_penalty: float = field(
        default=-0.1,
        metadata={"help": "End-token advantage when the list stops before K items (Rank-GRPO: -0.1)."},
    )
    segmentation: str = field(
        default="lines", metadata=_choices("Which tokens belong to rank k", "segmentation")
    )
    end_shaping: str = field(
        default="remark",
        metadata={
            "help": "The end token's advantage: 'remark' (+eos_complete_bonus with >= K lines, else eos_early_penalty; "
            "a list cut by the cap before K lines is an early stop too), 'rank_grpo' (Rank-GRPO's rule on its newline "
            "slots: bonus only with exactly K slots and nothing past them, penalty for an early stop, cut lists not "
            "shaped), 'none' (0)."
        },
    )
    rank_level_ratio: bool = field(
        default=False,
        metadata={
            "help": "Importance ratio per rank: exp(mean of the rank's token log-ratios), as Rank-GRPO. Only matters "
            "when num_iterations > 1 (with one update per generation the ratio is 1)."
        },
    )

    # --- the GRPO family (remark.algos.family; recipes in configs/recipes, docs/recipes.md) ----------
    recipe: str | None = field(
        default=None,
        metadata={
            "help": "Name of the recipe whose fields this run starts from (`remark train --recipe NAME`; a config "
            "file may name one too). Recorded in remark_config.json."
        },
    )
    advantage_baseline: str = field(
        default="mean", metadata=_choices("What is subtracted from rank rewards", "baseline")
    )
    gmpo_level: str | None = field(
        default=None,
        metadata={
            "help": "GMPO's geometric-mean objective: per-token log-ratios clipped in log space to [-epsilon, "
            "epsilon_high] in the advantage's direction, averaged over each 'rank' (or the whole 'sequence'), "
            "exponentiated, times the advantage; TRL's own clip is off. None = TRL's objective."
        },
    )
    loss_aggregation: str = field(default="token", metadata=_choices("Per-row loss weights", "aggregation"))
    truncation: str = field(
        default="score",
        metadata=_choices(
            "A list cut at max_completion_length",
            "truncation",
            " TRL's mask_truncated_completions (DAPO's overlong filtering) drops it from the loss instead.",
        ),
    )
    refill_batch: bool = field(
        default=False,
        metadata={
            "help": "DAPO's dynamic sampling / Olmo 3's active sampling: replace zero-signal groups (and groups of "
            "requests dropped by pass_rate_drop) by groups of further prompts until the batch is full. "
            "Needs zero_signal_filter."
        },
    )
    refill_max_rounds: int = field(
        default=8,
        metadata={
            "help": "Extra generation rounds per batch at most; groups still missing then stay in the batch, "
            "masked by the zero-signal filter."
        },
    )

    scoring_workers: int = field(
        default=0,
        metadata={
            "help": "Rank scoring off the critical path (remark.scoring.pool): N > 0 scores each batch in N worker "
            "processes, started right after generation and overlapped with what TRL runs before the reward "
            "call; 0 scores in the reward call. Same answers either way; each training process has its own."
        },
    )

    cpu_threads: int | None = field(
        default=None,
        metadata={
            "help": "torch's CPU threads for the run (intra-op; inter-op 1), set before the build_tiny SFT and "
            "the trainer (remark.run.cpu_threads). None keeps torch's default (all cores). The count changes the "
            "numbers (summation order), so it is part of the config; on a shared or busy CPU machine 1 is "
            "often far faster (idle threads wait on busy cores; bench/RESULTS.md)."
        },
    )

    # --- the colocated vLLM engine (remark.step.colocated_engine; TRL's vllm_* fields are the rest) ---------
    vllm_kv_cache_gib: float | None = field(
        default=None,
        metadata={
            "help": "KV cache of the colocated vLLM engine, in GiB (vLLM's kv_cache_memory_bytes; fractions are "
            "fine). None: vLLM's sizing, which on CPU is vllm_gpu_memory_utilization x host RAM (or "
            "VLLM_CPU_KVCACHE_SPACE GiB when that is set). Needs use_vllm with vllm_mode colocate."
        },
    )
    vllm_enforce_eager: bool = field(
        default=False,
        metadata={
            "help": "Run the colocated vLLM engine eagerly (no torch.compile / CUDA graphs): it starts in seconds "
            "instead of tens of seconds, and generates more slowly. Needs use_vllm with vllm_mode colocate."
        },
    )

    # --- validation and safety -------------------------------------------------------------------
    validation_steps: int = field(
        default=0,
        metadata={"help": "Validate (greedy lists on valid_split) every N steps and at step 0; 0 = off."},
    )
    validation_metric: str = field(
        default="eval/recall@20/union",
        metadata={
            "help": "Metric that picks the best checkpoint: eval/<metric>@<k>/<view> on greedy lists, or "
            "sampled/<metric>@<k>/<view> on sampled ones (needs validation_num_samples)."
        },
    )
    validation_max_requests: int | None = field(
        default=None, metadata={"help": "Validate on the first N requests of valid_split (None = all)."}
    )
    validation_batch_size: int = field(
        default=32, metadata={"help": "Prompts per generation batch in validation."}
    )
    validation_data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Validate against another prepared dataset (e.g. held-out responders of the same requests, "
            "data_prep.holdout); default: data_dir."
        },
    )
    validation_num_samples: int = field(
        default=0,
        metadata={
            "help": "Also score N sampled lists per request at validation_temperature (small models' greedy lists "
            "repeat one item: docs/experiments pitfall 1); written under <output_dir>/sampled/ in the same format."
        },
    )
    validation_temperature: float = field(
        default=1.0, metadata={"help": "Temperature of sampled validation."}
    )
    validation_engine: str = field(
        default="auto",
        metadata={
            "help": "What generates the validation lists: 'vllm' (the trainer's colocated vLLM engine, synced to "
            "the current weights first; Rank-GRPO validates with vLLM), 'transformers' (generate on the model being "
            "trained), 'auto' (vllm with use_vllm and vllm_mode colocate, else transformers). Greedy fp32 lists are "
            "the same either way."
        },
    )
    divergence_kl: float | None = field(
        default=None, metadata={"help": "Stop (keeping the best checkpoint) when the logged KL exceeds this."}
    )
    divergence_log_ratio: float | None = field(
        default=None, metadata={"help": "Stop when the mean |log ratio| to the reference exceeds this."}
    )

    # --- online group-size adaptation (remark.planning.adaptive) -------------------------------
    group_size_profile: str | None = field(
        default=None,
        metadata={
            "help": "Cost profile JSON (bench/gpu_check.py): enables the group-size advisor, which re-plans G from "
            "live pass rates, logs plan/recommended_G and writes it into checkpoints (applied on resume)."
        },
    )
    group_size_memory_budget_gb: float | None = field(
        default=None, metadata={"help": "Memory budget (GB) for the group-size advisor."}
    )
    group_size_every: int = field(default=50, metadata={"help": "Steps between group-size recommendations."})
    group_size_candidates: list[int] | None = field(
        default=None,
        metadata={"help": "G values the advisor may recommend (default: divisors of the batch)."},
    )
    adapt_group_size: bool = field(
        default=True,
        metadata={"help": "On resume, use the checkpoint's recommended G (requests per step kept fixed)."},
    )

    # --- LoRA / PEFT (remark.config.lora; peft is the optional extra remark[lora]) ------------------
    use_peft: bool = field(
        default=False,
        metadata={
            "help": "Train a LoRA adapter instead of every weight (TRL's peft_config); checkpoints, best/ and final/ "
            "hold the adapter only (adapter_config.json + adapter_model.safetensors). Needs peft."
        },
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank r (use_peft)."})
    lora_alpha: float = field(
        default=32, metadata={"help": "LoRA scaling alpha: the update is (alpha / r) B A (use_peft)."}
    )
    lora_dropout: float = field(
        default=0.05, metadata={"help": "Dropout on the LoRA branch's input, in [0, 1)."}
    )
    lora_target_modules: list[str] | None = field(
        default=None,
        metadata={
            "help": "Module names (suffixes) that get adapters, e.g. [q_proj, v_proj]; None = 'all-linear' "
            "(every linear layer but the output head). Checked against the model before training."
        },
    )
    merge_adapter: bool = field(
        default=False,
        metadata={
            "help": "When model_name_or_path is an adapter folder: merge it into its base first (then train the "
            "full model, or a new adapter with use_peft). False: keep training that adapter."
        },
    )
    adapter_base_model: str | None = field(
        default=None,
        metadata={
            "help": "Base model of an adapter model_name_or_path, instead of its adapter_config.json's "
            "base_model_name_or_path (a run folder moved to another machine)."
        },
    )

    baseline_run: str | None = field(
        default=None,
        metadata={
            "help": "A baseline run's output_dir (its eval_log.jsonl logs validation_metric): every validation "
            "logs the steps-to-reach of the baseline's last validated value (reach/<metric>/fraction, with "
            "its CI) to report_to's loggers. Needs validation_steps."
        },
    )
    model_card_license: str | None = field(
        default=None,
        metadata={
            "help": "license of the model cards in best/ and final/ (a Hugging Face license id; it is the base "
            "model's license); None = 'unknown'."
        },
    )

    # --- tiny CPU runs ---------------------------------------------------------------------------
    build_tiny: dict[str, Any] | None = field(
        default=None,
        metadata={
            "help": "Build synthetic data and a tiny model under output_dir before training (keys: n_requests, "
            "n_items, seed, sft_steps, spec); used by configs/tiny_cpu.yaml so it runs anywhere."
        },
    )

    # TRL changed these defaults across versions: a run must set them (see the module docstring).
    loss_type: str | None = field(
        default=None, metadata={"help": f"One of {', '.join(LOSS_TYPES)} (required)."}
    )
    scale_rewards: str | None = field(
        default=None,
        metadata={
            "help": "Must equal advantage_scaling, TRL's value of the same name: "
            + ", ".join(repr(spec("scale", n).meta["trl"]) for n in names("scale"))
            + " (required)."
        },
    )

    def __post_init__(self) -> None:
        validate_remark_fields(self)
        validate_lora(self)
        validate_tracking(self)
        super().__post_init__()
        validate_remark_layout(self)

    def grounding_requested(self) -> dict[str, Any]:
        """The grounding fields that are set (not None): the overrides of the dataset's grounding."""
        names = ("match_mode", "year_tolerance", "match_threshold", "match_scorer")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def grounding(self) -> Any:
        """``catalog.match.GroundingSettings`` of the set fields over the defaults (``run_training`` first
        fills every field from the dataset, so there this is the dataset's grounding plus the overrides)."""
        from catalog.match import GroundingSettings

        return GroundingSettings().with_overrides(self.grounding_requested())
