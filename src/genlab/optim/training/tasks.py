"""The tasks `optim train` learns (and so the studies): digits (fixed splits, class
subsets), rendered shapes, your images; few-shot training sets, label noise.

Every task is cut from scikit-learn's digits (genlab.core.data: 20% test (359 images), the rest the
"training pool"; standardised with the pool's statistics). Two ways to use the pool
(``split``):

- ``full``: train on the whole pool (1,438 images), no validation set;
- ``holdout``: a stratified 75/25 split of the pool into a fit set (1,079 images) and a
  validation set (359) on which hyper-parameters are chosen; test data are never used
  for a choice.

The split is fixed by ``data_seed``, so trainings that differ only in their seed see the
same fit, validation and test sets. A task (``TASKS``) keeps some classes, relabelled
0..k-1 in order (e.g. ``digits0-4`` and ``digits5-9`` for transfer learning);
``per_class`` > 0 keeps that many fit images per class (the first in a seeded order).

``translate`` > 0 makes the task's domain *jittered digits*: every fit, validation and test
image is moved by a shift drawn uniformly from [-translate, translate] pixels per axis (the
uncovered border filled with the background value, blank paper), one fixed draw per image
and split from ``data_seed``; ``translate_copies`` > 1 stacks that many independently
shifted copies of the fit set (a larger training set of the same images, as the transfer
study's pretraining uses) and ``val_copies`` > 1 of the validation set (a validation score
less tied to one draw of shifts, as the transfer study's search uses; the first copy is the
one-copy validation set). The shift is what few images cannot teach and many can
(docs/nonuniformity.md, transfer).

``shapes`` is the rendered objects-with-parts task (genlab.core.data.shapes: 5,000 colour
images of 10 classes, 32x32 by default, split as the digits are; its train + val the pool);
``translate`` and asymmetric noise are the digits' own and refused for it.

``folder:PATH`` is a task of the user's images (genlab.core.data.imagefolder): its seeded split's
train + val are the pool and its test the test set, in the digits' shares; ``full``,
``holdout``, ``per_class`` and symmetric label noise work as on the digits, the images stay
on disk (decoded batch by batch); ``translate`` and asymmetric noise, which are the digits'
own, are refused by :func:`check_task` before a run folder is made.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from genlab.core.data import ImageData, Split, load_digits_data, stratified_split
from genlab.core.data import majority_accuracy as core_majority_accuracy
from genlab.core.data.imagefolder import folder_data, folder_path, scan_folder
from genlab.core.data.shapes import NATIVE_SIZE, load_shapes_data
from genlab.core.errors import ConfigError, require_choice
from genlab.core.registry import Registry
from genlab.optim.training.noise import corrupt_labels

SPLITS = ("full", "holdout")
VAL_FRACTION = 0.25
MAX_TRANSLATE = 3  # pixels, of an 8 x 8 digit
MAX_TRANSLATE_COPIES = 16
_SPLIT_OFFSET = {"fit": 0, "val": 1000, "test": 2000}  # translation draws per split


@dataclass
class TaskData:
    """Fit (training), optional validation and test sets of one task."""

    fit: Split
    val: Split | None
    test: Split
    num_classes: int
    in_channels: int
    size: int
    clean_fit_labels: torch.Tensor  # the fit labels before any label noise
    inference: dict | None = None  # what predicting on image files needs (ImageData's)
    description: str | None = None  # what a run says of its data (ImageData's)


def check_task(task: str, *, translate: int = 0, label_noise: float = 0.0,
               noise_kind: str = "symmetric") -> None:
    """ConfigError for an unknown task, a bad image folder, or an option a folder cannot take
    (checked before a run folder is made)."""
    if (path := folder_path(task)) is None:
        if TASKS.get(task).digits:
            return
    if translate:
        raise ConfigError("--translate jitters the 8x8 digits; it does not apply to "
                          f"--dataset {task}")
    if label_noise > 0 and noise_kind == "asymmetric":
        raise ConfigError("asymmetric label noise maps digit classes; use symmetric noise on "
                          f"--dataset {task}")
    if path is not None:
        scan_folder(path)


@functools.lru_cache(maxsize=4)
def _digits(data_seed: int, size: int = 8) -> ImageData:
    """The digits split of a data seed, loaded once per process (never mutated); the digits
    are 8x8 whatever ``size`` says."""
    return load_digits_data(size=8, seed=data_seed)


@functools.lru_cache(maxsize=2)
def _shapes(data_seed: int, size: int) -> ImageData:
    """The rendered shapes of a data seed at ``size``, made once per process."""
    return load_shapes_data(size, data_seed)


@dataclass(frozen=True)
class Task:
    """A registered task: the classes it keeps of its source (relabelled 0..k-1 in this
    order), the source (``load(data_seed, size)``: an ImageData), the source's own side (the
    default ``--size``), and whether the digits' own options (``translate``, the asymmetric
    label map) apply."""

    classes: tuple[int, ...]
    load: Callable[[int, int], ImageData]
    size: int = 8
    digits: bool = True


TASKS: Registry[Task] = Registry("task")
TASKS.register("digits", Task(tuple(range(10)), _digits))
TASKS.register("digits0-4", Task((0, 1, 2, 3, 4), _digits))
TASKS.register("digits5-9", Task((5, 6, 7, 8, 9), _digits))
TASKS.register("shapes", Task(tuple(range(10)), _shapes, size=NATIVE_SIZE, digits=False))


def _keep_classes(split: Split, classes: tuple[int, ...]) -> Split:
    if classes == tuple(range(int(split.labels.max()) + 1)):
        return split
    relabel = torch.full((int(split.labels.max()) + 1,), -1, dtype=torch.long)
    relabel[list(classes)] = torch.arange(len(classes))
    new = relabel[split.labels]
    keep = new >= 0
    return Split(split.images[keep], new[keep])


def _per_class(split: Split, per_class: int, seed: int) -> Split:
    order = torch.randperm(len(split), generator=torch.Generator().manual_seed(seed))
    labels = split.labels[order]
    picked = torch.cat([order[labels == c][:per_class] for c in labels.unique()])
    picked = picked.sort().values
    return split.take(picked)


def translate_images(images: torch.Tensor, max_shift: int, seed: int,
                     background: float) -> torch.Tensor:
    """Each image (n, c, h, w) moved by its own shift (dy, dx), drawn uniformly from
    [-max_shift, max_shift]² with ``seed``; what the shift uncovers is ``background``."""
    if max_shift == 0:
        return images
    n, _, h, w = images.shape
    g = torch.Generator().manual_seed(seed)
    shifts = torch.randint(-max_shift, max_shift + 1, (n, 2), generator=g)
    m = max_shift
    padded = torch.nn.functional.pad(images, (m, m, m, m), value=background)
    out = torch.empty_like(images)
    for dy in range(-m, m + 1):
        for dx in range(-m, m + 1):
            rows = ((shifts[:, 0] == dy) & (shifts[:, 1] == dx)).nonzero().flatten()
            if len(rows):  # an image moved by (dy, dx) reads the padded one at (m - dy, m - dx)
                out[rows] = padded[rows, :, m - dy:m - dy + h, m - dx:m - dx + w]
    return out


def check_translation(translate: int, copies: int, name: str = "translate_copies") -> None:
    """ConfigError unless 0 <= translate <= MAX_TRANSLATE and 1 <= copies (option ``name``)
    <= the limit."""
    if not 0 <= translate <= MAX_TRANSLATE:
        raise ConfigError(f"translate must be in [0, {MAX_TRANSLATE}] pixels, got {translate}")
    if not 1 <= copies <= MAX_TRANSLATE_COPIES:
        raise ConfigError(f"{name} must be in [1, {MAX_TRANSLATE_COPIES}], got {copies}")
    if copies > 1 and translate == 0:
        raise ConfigError(f"{name} > 1 needs translate > 0 (copies of unshifted images "
                          "would be the same images)")


def _translated(split: Split, name: str, translate: int, copies: int, data_seed: int,
                background: float) -> Split:
    seed = 7919 * data_seed + _SPLIT_OFFSET[name]
    parts = [translate_images(split.images, translate, seed + k, background)
             for k in range(copies)]
    return Split(torch.cat(parts), split.labels.repeat(copies))


def task_data(task: str = "digits", split: str = "full", *, data_seed: int = 0,
              per_class: int = 0, label_noise: float = 0.0, noise_kind: str = "symmetric",
              noise_seed: int = 0, translate: int = 0, translate_copies: int = 1,
              val_copies: int = 1, size: int = 8, checked: bool = False) -> TaskData:
    """The sets of one task (see module doc); label noise touches the fit labels only.
    ``folder:PATH``: the user's images (genlab.core.data.imagefolder), resized to ``size``, split
    as the digits are (its train + val the pool, its test the test set), decoded batch by
    batch. ``checked``: the caller's config has run :func:`check_task` and
    :func:`check_translation` on these options (TrainConfig.validate), so they are not run
    again."""
    require_choice("split", split, SPLITS)
    if per_class < 0:
        raise ConfigError(f"per_class must be >= 0, got {per_class}")
    if not checked:
        check_translation(translate, translate_copies)
        check_translation(translate, val_copies, "val_copies")
        check_task(task, translate=translate, label_noise=label_noise, noise_kind=noise_kind)
    if (path := folder_path(task)) is not None:
        data = folder_data(path, size, data_seed)
        num_classes, pool, test = data.num_classes, data.train_full(), data.test
    else:
        entry = TASKS.get(task)
        data = entry.load(data_seed, size)
        num_classes = len(entry.classes)
        pool = _keep_classes(data.train_full(), entry.classes)
        test = _keep_classes(data.test, entry.classes)
    val = None
    if split == "holdout":
        fit_idx, val_idx = stratified_split(pool.labels.numpy(), (1 - VAL_FRACTION, VAL_FRACTION),
                                            data_seed)
        fit, val = pool.take(fit_idx), pool.take(val_idx)
        if len(val) == 0:
            raise ConfigError(f"--split holdout: {task} has too few images for a validation "
                              "set (a quarter of each class's training images)")
    else:
        fit = pool
    if per_class:
        fit = _per_class(fit, per_class, data_seed)
    if translate:
        background = float(data.train_full().images.amin())  # the standardised blank paper
        fit = _translated(fit, "fit", translate, translate_copies, data_seed, background)
        test = _translated(test, "test", translate, 1, data_seed, background)
        if val is not None:
            val = _translated(val, "val", translate, val_copies, data_seed, background)
    clean = fit.labels
    if label_noise > 0 and noise_kind == "asymmetric" and task != "digits":
        raise ConfigError(f"asymmetric label noise maps digit classes; task {task!r} "
                          "relabels them (use task 'digits')")
    if label_noise > 0:
        noisy = corrupt_labels(clean, label_noise, noise_kind, num_classes=num_classes,
                               seed=noise_seed)
        fit = Split(fit.images, noisy)
    # the classes predicted are the data's own: a folder, or every class of a task's source
    # untranslated
    own = path is not None or (len(TASKS.get(task).classes) == data.num_classes
                               and not translate)
    return TaskData(fit, val, test, num_classes, data.in_channels, data.size, clean,
                    data.inference if own else None, data.description)


def majority_accuracy(data: TaskData) -> float:
    """Test accuracy (percent) of the constant predictor of the fit set's most frequent label."""
    return core_majority_accuracy(data.fit.labels, data.test.labels)
