"""Label noise for robustness studies: symmetric flips and an asymmetric class map.

Symmetric noise of rate r: each training label is, with probability r, replaced by one of
the other classes drawn uniformly. Asymmetric noise of rate r: each label of a source
class of the map flips to its target with probability r (Patrini et al. 2017 protocol).
The CIFAR-10 map is truck->automobile, bird->airplane, deer->horse, cat<->dog (9->1, 2->0,
4->7, 3<->5). For digits (ours) we map visually confusable digits the same way: four
one-way or swapped pairs, 7->1, 4->9, 5->6, 3<->8.
"""

from __future__ import annotations

import torch

from genlab.core.errors import ConfigError, require_choice
from genlab.core.seeding import make_generator

NOISE_KINDS = ("symmetric", "asymmetric")
DIGITS_ASYMMETRIC_MAP = {7: 1, 4: 9, 5: 6, 3: 8, 8: 3}
CIFAR10_ASYMMETRIC_MAP = {9: 1, 2: 0, 4: 7, 3: 5, 5: 3}


def corrupt_labels(labels: torch.Tensor, rate: float, kind: str = "symmetric", *,
                   num_classes: int = 10, seed: int = 0,
                   class_map: dict[int, int] | None = None) -> torch.Tensor:
    """A noisy copy of ``labels`` (seeded); the originals are untouched."""
    require_choice("noise kind", kind, NOISE_KINDS)
    if not 0 <= rate <= 1:
        raise ConfigError(f"label noise rate must be in [0, 1], got {rate}")
    gen = make_generator(seed, 7919)
    flip = torch.rand(len(labels), generator=gen) < rate
    noisy = labels.clone()
    if kind == "symmetric":
        if num_classes < 2:
            raise ConfigError("symmetric label noise needs at least 2 classes")
        shift = torch.randint(1, num_classes, (len(labels),), generator=gen)
        noisy[flip] = (labels[flip] + shift[flip]) % num_classes
    else:
        mapping = DIGITS_ASYMMETRIC_MAP if class_map is None else class_map
        for src, dst in mapping.items():
            sel = flip & (labels == src)
            noisy[sel] = dst
    return noisy
