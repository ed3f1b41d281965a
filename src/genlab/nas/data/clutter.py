"""Procedural corruption for harder image proxies: 1/f clutter, figure-ground composites, noise.

Natural images have a power spectrum that falls about as 1/f^2 with spatial frequency f
(Field, JOSA A 1987; van der Schaaf & van Hateren, Vision Research 1996). ``pink_noise`` draws
backgrounds with that spectrum (random phases, amplitude 1/f^(exponent/2); it lives in
genlab.core.data.shapes, whose objects sit on such clutter too). ``on_clutter``
paints grey figures (values in [0, 1], e.g. digit strokes) in a random colour and polarity onto
such coloured backgrounds at a random position: the class is carried by the figure's shape
only, and the clutter has edges at every scale, so telling figure from ground needs oriented
filters and their composition rather than a threshold or a blur (our construction, used as a
harder proxy for ranking cells). ``corrupt`` is the plainer alternative: lowered contrast,
strong Gaussian noise and an occluding square, fixed per image.

Every draw comes from the ``torch.Generator`` passed in, so a data set is reproducible.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from genlab.core.data.shapes import pink_noise


def on_clutter(figures: torch.Tensor, generator: torch.Generator, *, size: int,
               figure_fraction: float = 0.75, clutter: float = 0.15,
               noise: float = 0.03) -> torch.Tensor:
    """Paint (n, 1, h, w) grey figures in [0, 1] onto coloured 1/f clutter: (n, 3, size, size).

    Each figure is resized to ``figure_fraction`` of the side and placed at a random position;
    its colour differs from mid-grey by 0.25 to 0.5 per channel, all channels lighter or all
    darker (random polarity). The background is mid-grey plus ``clutter`` times pink noise
    (one shared map and one per channel, so the clutter is coloured), and ``noise`` is white
    pixel noise on top.
    """
    n = figures.shape[0]
    side = max(1, round(figure_fraction * size))
    figs = F.interpolate(figures, size=(side, side), mode="bilinear", align_corners=False)
    alpha = torch.zeros(n, 1, size, size)
    offsets = torch.randint(0, size - side + 1, (n, 2), generator=generator)
    for k, (top, left) in enumerate(offsets.tolist()):
        alpha[k, 0, top:top + side, left:left + side] = figs[k, 0].clamp(0, 1)
    shared = pink_noise(n, 1, size, generator)
    background = 0.5 + clutter * (shared + 0.5 * pink_noise(n, 3, size, generator)) / 1.118
    polarity = torch.where(torch.rand(n, 1, 1, 1, generator=generator) < 0.5, -1.0, 1.0)
    colour = 0.5 + polarity * (0.25 + 0.25 * torch.rand(n, 3, 1, 1, generator=generator))
    image = (1 - alpha) * background + alpha * colour
    return image + noise * torch.randn(image.shape, generator=generator)


def corrupt(images: torch.Tensor, generator: torch.Generator, *, noise: float = 0.25,
            contrast: tuple[float, float] = (0.5, 1.0), occlude: float = 0.25) -> torch.Tensor:
    """Fixed per-image corruption of (n, c, h, w) images in [0, 1]: contrast, noise, occlusion.

    Contrast is scaled about mid-grey by a factor drawn from ``contrast``; Gaussian noise of std
    ``noise`` is added; a square of side ``occlude`` x h at a random position is set to
    mid-grey.
    """
    n, _, h, w = images.shape
    lo, hi = contrast
    scale = lo + (hi - lo) * torch.rand(n, 1, 1, 1, generator=generator)
    out = 0.5 + scale * (images - 0.5) + noise * torch.randn(images.shape, generator=generator)
    side = max(1, round(occlude * h))
    corners = torch.stack([torch.randint(0, h - side + 1, (n,), generator=generator),
                           torch.randint(0, w - side + 1, (n,), generator=generator)], 1)
    for k, (top, left) in enumerate(corners.tolist()):
        out[k, :, top:top + side, left:left + side] = 0.5
    return out
