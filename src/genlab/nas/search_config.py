"""The options of `genlab nas search` (SearchConfig), declared once.

This module imports nothing heavy (no torch): the command line is generated from it when
``genlab`` starts. What resolving or checking a config needs is imported inside the methods.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from genlab.core.errors import ConfigError
from genlab.core.options import check_options, option

ORDERS = (1, 2)
DEFAULT_METHOD = "darts"
PROXY_ARCH_LR = 3e-2  # the digits proxy's alpha learning rate for DARTS (docs/ber.md)

# fp16 would need a GradScaler on both backward passes of the bilevel step (alpha, then the
# weights) and on the unrolled gradient; bf16 has float32's range and needs none.
SEARCH_PRECISIONS = ("off", "bf16")
# Options a search may change on resume beside core's own: the table only judges the result.
RESUME_FREE = ("nb201_table",)


PROXY = "default: the space's digits proxy"
SPACES = "genlab.nas.spaces:space_names"
PENALTY_NAMES = "genlab.nas.regularizers:PENALTIES"
TABLE_HELP = ("NB201 accuracy CSV (default: $GENLAB_NB201_TABLE); judges the result, never "
              "selects; convert the official files with `genlab nas table convert`.")


def _parts(kind: str):
    def names() -> tuple[str, ...]:
        from genlab.nas.methods import part_names

        return tuple(part_names()[kind])
    return names


@dataclass
class SearchConfig:
    """Every option of a search; None means the space's digits-proxy default (see module doc)."""

    space: str = option("nb201", help="Search space (docs/nas_spaces.md; genlab nas spaces).",
                        choices=SPACES)
    dataset: str = option("digits", help="Data set: a registered one (those read from disk need "
                          "--data-root), or folder:PATH, your images (one sub-folder per "
                          "class; docs/cli.md).", choices="genlab.nas.data:DATASETS",
                          checked=False)
    data_root: str | None = option(None, help="Folder with the data set's files (not for "
                                   "digits).")
    size: int | None = option(None, help=f"Input side: the networks take squares; digits are "
                              f"resized ({PROXY}); N or NxN.", gt=0, parse="square")
    channels: int | None = option(None, help=f"Width C of the supernet ({PROXY}; upstream 16).",
                                  gt=0, flags=("-C",))
    cells: int | None = option(None, help=f"NB201: cells per stage (upstream 5); DARTS spaces: "
                               f"cells (upstream 8) ({PROXY}).", gt=0, flags=("-N",))
    batch_size: int = option(64, help="Batch of each bilevel step (train and val).", gt=0)
    steps: int | None = option(None, help=f"Bilevel steps (the budget; {PROXY}).", gt=0)
    method: str | None = option(None, help="Search method at its authors' preset (genlab nas "
                                "methods; docs/nas_methods.md); default: DARTS with --reg ber.",
                                choices="genlab.nas.methods:method_names")
    select: str = option("argmax", help="Selection rule: argmax (the space's rule on alpha) | "
                         "pt (DARTS-PT's projection on the trained supernet).",
                         choices=_parts("select"))
    relaxation: str | None = option(None, help="Mixing weights from alpha (default: the "
                                    "method's).", choices=_parts("relaxation"))
    perturb: str | None = option(None, help="Perturbation of the weight step's mixing "
                                 "(default: the method's).", choices=_parts("perturb"))
    stop: str | None = option(None, help="Stopping rule (default: the method's).",
                              choices=_parts("stop"))
    partial_channels: int | None = option(None, help="K: ops see C/K channels (PC-DARTS: 4).",
                                          gt=0)
    edge_norm: bool | None = option(None, help="Per-edge betas normalised over each node's "
                                    "inputs (PC-DARTS).")
    aux_skip: bool | None = option(None, help="Auxiliary skip beta x aux(x) on every edge, "
                                   "beta 1 -> 0 (DARTS-).")
    drop_path: float | None = option(None, help="Final drop-path probability in the search "
                                     "(R-DARTS DP: 0.6).", ge=0, le=1)
    arch_start: float | None = option(None, help="Fraction of the steps before alpha first "
                                      "moves (PC-DARTS: 0.3).", ge=0, le=1)
    reg: str | None = option(None, help="Regulariser of alpha (default: the method's own; "
                             "`ber` when no method is named).", choices=PENALTY_NAMES,
                             more="genlab.nas.regularizers:regularizer_help")
    reg_strength: float | None = option(None, help="lambda_0 (default: per regulariser, see "
                                        "docs).", ge=0)
    reg_schedule: str | None = option(None, help="up | down | constant (BER variants).",
                                      choices=("up", "down", "constant"))
    reg_params: dict[str, float] = option(
        factory=dict, parse="params", flags=("--reg-param",),
        help="The regulariser's own settings, KEY=VALUE, repeated (ber-lbe: h_min, the floor "
             "of its node targets); each penalty lists its settings in docs/ber.md.")
    seed: int = option(0, help="The search's seed (data split, init, batches).", ge=0)
    device: str = option("cpu", help="cpu | cuda | cuda:N | auto (cuda when there is one).")
    order: int = option(1, help="1: first-order DARTS; 2: second order (unrolled).",
                        choices=ORDERS)
    w_lr: float = option(0.025, help="SGD lr of the weights (cosine to --w-lr-min).", gt=0)
    w_lr_min: float = option(0.001, help="Final SGD lr of the weights.", ge=0)
    w_momentum: float = option(0.9, help="SGD momentum of the weights.", ge=0)
    w_weight_decay: float | None = option(None, help="SGD weight decay of the weights "
                                          "(default: the method's; DARTS 3e-4).", ge=0)
    arch_lr: float | None = option(None, help="Adam lr of alpha (default 3e-2 x the method's "
                                   "ratio to DARTS' 3e-4).", gt=0)
    arch_weight_decay: float | None = option(None, help="Adam weight decay of alpha (default: "
                                             "the method's).", ge=0)
    grad_clip: float = option(5.0, help="Gradient-norm clip of the weight step.", gt=0)
    augment: bool = option(True, help="Augment train and val batches (digits proxy).")
    diag_batch: int = option(64, help="Batch of the diagnostics (entropy, val accuracy).", gt=0)
    hessian_points: int = option(6, help="How often the alpha-Hessian eigenvalue is computed "
                                 "over the run (0: never).", ge=0)
    nb201_table: str | None = option(None, help=TABLE_HELP)
    threads: int = option(1, help="torch CPU threads, recorded in config.json (0: torch's "
                          "default, the machine's cores; the search is chaotic in the count).",
                          ge=0)
    amp: str = option("off", help="off | bf16: autocast in the bilevel step (fp16 is refused: "
                      "no loss scaling in the search).", choices=SEARCH_PRECISIONS)
    channels_last: bool = option(False, help="NHWC layout of supernet and inputs.")
    force_every: int = option(0, help="Also log the alpha forces every this many steps "
                              "(forces.jsonl; 0: never).", ge=0)

    def resolved(self, space=None, method=None) -> SearchConfig:
        """A copy with every None size option filled from the space's proxy defaults and
        every None method option from the method's preset (``space`` and ``method``: the
        entries already looked up, else they are looked up here)."""
        from genlab.nas.methods import get_method
        from genlab.nas.regularizers import BER
        from genlab.nas.spaces import get_space

        proxy = (space or get_space(self.space)).proxy
        fill = {k: getattr(proxy, k) for k in ("size", "channels", "cells", "steps")
                if getattr(self, k) is None}
        method = method or get_method(self.method or DEFAULT_METHOD)
        fill["method"] = method.name
        if self.reg is None:
            fill["reg"] = method.reg if self.method is not None else BER
        if self.w_weight_decay is None:
            fill["w_weight_decay"] = method.w_weight_decay
        if self.arch_weight_decay is None:
            fill["arch_weight_decay"] = method.arch_weight_decay
        if self.arch_lr is None:
            fill["arch_lr"] = PROXY_ARCH_LR * method.arch_lr_scale
        return replace(self, **fill)

    def validate(self, space=None, method=None, *, parts: bool = True) -> None:
        """Every check that needs no data: the fields' declarations, then the space's size
        rules, the limits, the data set, the method's orders and (``parts``) its parts;
        ``space`` and ``method``: the entries already looked up."""
        from genlab.nas.data import check_dataset
        from genlab.nas.inputs import check_limits
        from genlab.nas.methods import get_method, search_method
        from genlab.nas.spaces import get_space

        if self.amp == "fp16":
            raise ConfigError("--amp fp16 is not available for the search: its two backward "
                              "passes (alpha, then the weights) have no loss scaling; use "
                              "--amp bf16 (float32's range, no scaler needed)")
        check_options(self)  # types, choices and limits as the fields declare them
        space = space or get_space(self.space)
        space.check_size_options(self.channels, self.cells)
        check_limits(size=self.size, channels=self.channels, cells=self.cells,
                     batch_size=self.batch_size, steps=self.steps)
        check_dataset(self.dataset, self.data_root)
        method = method or get_method(self.method or DEFAULT_METHOD)
        if self.order not in method.orders:
            raise ConfigError(f"method {method.name} is first order only (its authors have no "
                              f"second-order step); use --order 1")
        if parts:
            search_method(replace(self, method=method.name), method)  # unknown parts, fractions
