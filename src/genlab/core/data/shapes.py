"""Synthetic shapes: objects made of parts, rendered in colour on textured clutter (embedded data).

A procedural 32x32 RGB classification task built to hold what makes convolutions matter in
natural images (our construction, no download): ten object classes, each a fixed arrangement
of two to four parts (discs, boxes, triangles, rings: a house is a box under a triangle, a car
a long box with a cabin and two wheels, ...), so that classes differ in the shape and layout of
their parts; each part filled with its own colour and an oriented grating (a texture at one of
three scales); the object scaled, rotated and placed at random; behind it coloured 1/f clutter
(natural images' power spectrum: Field, JOSA A 1987) with a grating of its own and one or two
distractor parts; in front of it, for a third of the images, an occluding bar; over everything a
lighting field (gain, a linear gradient, a colour cast) and pixel noise.

Colour carries some class information, never all of it: a part's hue is drawn within +-0.25
(of the colour circle) of its class's hue, and neighbouring classes' hues are 0.1 apart, so
a colour histogram alone ranks well below the shapes.

Every random number comes from one ``torch.Generator`` per (seed, class), so a data set is a
function of its seed; classes are balanced (``per_class`` images each) and images lie in
[0, 1]. Rendering is batched over the images of a class (masks on the pixel grid, soft edges
one pixel wide), so 5,000 images take well under a second on one core.

:func:`pink_noise` (coloured 1/f backgrounds) is shared with the NAS proxies' clutter.
"""

from __future__ import annotations

import math

import torch

from genlab.core.data import (
    ImageData,
    Split,
    inference_record,
    search_fractions,
    standardise,
    stratified_split,
)
from genlab.core.errors import ConfigError, require_positive
from genlab.core.seeding import make_generator

NUM_CLASSES = 10
PER_CLASS = 500  # the data set: 5,000 images, split 2,000 train, 2,000 val, 1,000 test
NATIVE_SIZE = 32
CLASS_NAMES = ("house", "tree", "car", "snowman", "cross", "ring", "arrow", "tee",
               "dumbbell", "mushroom")
OCCLUDED = 0.35  # the share of images with an occluding bar
HUE_SPREAD = 0.25  # a part's hue: its class's hue +- this much (of the colour circle)
MIN_SIZE = 12  # below this side the parts blur into one another

# Each class: its parts in object coordinates ([-1, 1] square, y down), (kind, parameters).
# disc (cx, cy, r); box (cx, cy, half_w, half_h); tri (x0, y0, x1, y1, x2, y2);
# ring (cx, cy, r_in, r_out); cap (cx, cy, r): the upper half of a disc.
TEMPLATES: tuple[tuple[tuple[str, tuple[float, ...]], ...], ...] = (
    (("box", (0.0, 0.3, 0.55, 0.45)), ("tri", (0.0, -0.85, -0.75, -0.15, 0.75, -0.15))),
    (("disc", (0.0, -0.3, 0.55)), ("box", (0.0, 0.55, 0.13, 0.4))),
    (("box", (0.0, 0.05, 0.85, 0.25)), ("box", (-0.05, -0.35, 0.4, 0.17)),
     ("disc", (-0.5, 0.35, 0.22)), ("disc", (0.5, 0.35, 0.22))),
    (("disc", (0.0, 0.4, 0.45)), ("disc", (0.0, -0.42, 0.32))),
    (("box", (0.0, 0.0, 0.8, 0.18)), ("box", (0.0, 0.0, 0.18, 0.8))),
    (("ring", (0.0, 0.0, 0.42, 0.75)),),
    (("box", (-0.25, 0.0, 0.6, 0.15)), ("tri", (0.9, 0.0, 0.3, -0.5, 0.3, 0.5))),
    (("box", (0.0, -0.6, 0.8, 0.17)), ("box", (0.0, 0.2, 0.17, 0.65))),
    (("disc", (-0.58, 0.0, 0.32)), ("disc", (0.58, 0.0, 0.32)), ("box", (0.0, 0.0, 0.5, 0.1))),
    (("cap", (0.0, 0.0, 0.8)), ("box", (0.0, 0.4, 0.14, 0.42))),
)
DISTRACTOR_KINDS = ("disc", "box", "tri")


def pink_noise(n: int, channels: int, size: int, generator: torch.Generator,
               exponent: float = 2.0) -> torch.Tensor:
    """(n, channels, size, size) noise with power ~ 1/f^exponent, each map standardised."""
    fy = torch.fft.fftfreq(size).view(-1, 1)
    fx = torch.fft.rfftfreq(size).view(1, -1)
    f = torch.sqrt(fx ** 2 + fy ** 2).clamp_min(1.0 / size)
    amplitude = f ** (-exponent / 2)
    amplitude[0, 0] = 0.0  # no constant component
    shape = (n, channels, size, size // 2 + 1)
    spectrum = torch.complex(torch.randn(shape, generator=generator),
                             torch.randn(shape, generator=generator)) * amplitude
    maps = torch.fft.irfft2(spectrum, s=(size, size))
    maps = maps - maps.mean(dim=(2, 3), keepdim=True)
    return maps / maps.std(dim=(2, 3), keepdim=True).clamp_min(1e-8)


def _uniform(gen: torch.Generator, n: int, lo: float, hi: float) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(n, generator=gen)


def _col(t: torch.Tensor) -> torch.Tensor:
    """(n,) -> (n, 1, 1): one value per image, broadcast over the pixel grid."""
    return t.view(-1, 1, 1)


def hsv_to_rgb(h: torch.Tensor, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """(n,) hue in [0, 1), saturation, value -> (n, 3) RGB in [0, 1] (the standard hexcone)."""
    k = torch.stack([(5 + h * 6) % 6, (3 + h * 6) % 6, (1 + h * 6) % 6], 1)
    return v.unsqueeze(1) - (v * s).unsqueeze(1) * torch.clamp(torch.minimum(k, 4 - k), 0, 1)


def _part_distance(kind: str, p, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Signed distance-like field of one part (positive inside, in object units)."""
    if kind in ("disc", "cap", "ring"):
        d = torch.sqrt((u - p[0]) ** 2 + (v - p[1]) ** 2)
        if kind == "disc":
            return p[2] - d
        if kind == "cap":
            return torch.minimum(p[2] - d, p[1] - v)
        return torch.minimum(p[3] - d, d - p[2])
    if kind == "box":
        return torch.minimum(p[2] - (u - p[0]).abs(), p[3] - (v - p[1]).abs())
    if kind == "tri":
        pts = [(p[0], p[1]), (p[2], p[3]), (p[4], p[5])]
        cx, cy = sum(q[0] for q in pts) / 3, sum(q[1] for q in pts) / 3
        sides = []
        for (ax, ay), (bx, by) in zip(pts, pts[1:] + pts[:1], strict=True):
            nx, ny = by - ay, ax - bx  # a normal of edge a -> b
            norm = math.hypot(nx, ny)
            sign = 1.0 if nx * (cx - ax) + ny * (cy - ay) > 0 else -1.0  # inside positive
            sides.append(sign * (nx * (u - ax) + ny * (v - ay)) / norm)
        return torch.minimum(torch.minimum(sides[0], sides[1]), sides[2])
    raise ConfigError(f"unknown part kind {kind!r}")


def _texture(gen: torch.Generator, n: int, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """An oriented grating per image, 1 +- amplitude, at 1.5, 3 or 6 cycles per unit."""
    freq = torch.tensor([1.5, 3.0, 6.0])[torch.randint(0, 3, (n,), generator=gen)]
    angle = _uniform(gen, n, 0, math.pi)
    phase = _uniform(gen, n, 0, 2 * math.pi)
    amp = _uniform(gen, n, 0.0, 0.25)
    wave = torch.sin(math.pi * _col(freq) * (u * _col(torch.cos(angle))
                                             + v * _col(torch.sin(angle))) + _col(phase))
    return 1 + _col(amp) * wave


def _paint(image: torch.Tensor, mask: torch.Tensor, colour: torch.Tensor,
           texture: torch.Tensor) -> torch.Tensor:
    """Paint (n, 3) colours modulated by (n, h, w) textures where the (n, h, w) mask is 1."""
    fill = colour.view(-1, 3, 1, 1) * texture.unsqueeze(1)
    m = mask.unsqueeze(1)
    return image * (1 - m) + fill * m


def _frame(gen: torch.Generator, n: int, grid: torch.Tensor, scale: tuple[float, float],
           turn: float, centre: float):
    """Each image's object coordinates (u, v) on the pixel grid: scaled, rotated, placed."""
    s = _uniform(gen, n, *scale)
    a = _uniform(gen, n, -turn, turn)
    tx, ty = (_uniform(gen, n, -1, 1) * (1 - s) * centre for _ in range(2))
    x, y = grid[0].unsqueeze(0) - _col(tx), grid[1].unsqueeze(0) - _col(ty)
    cos, sin = _col(torch.cos(a)), _col(torch.sin(a))
    return (cos * x + sin * y) / _col(s), (-sin * x + cos * y) / _col(s), s


def _soft(d: torch.Tensor, pixel: torch.Tensor) -> torch.Tensor:
    """A mask from a distance field, its edge one pixel wide (``pixel``: (n,) object units)."""
    return torch.sigmoid(d / _col(pixel) * 2.0)


def render_class(label: int, n: int, size: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` images (n, 3, size, size) in [0, 1] of class ``label`` (module docstring)."""
    g = generator
    centres = (torch.arange(size, dtype=torch.float32) + 0.5) / size * 2 - 1
    grid = torch.stack(torch.meshgrid(centres, centres, indexing="xy"))  # (2, h, w): x, y
    # background: mid-level colour, coloured 1/f clutter and a grating of its own
    base = hsv_to_rgb(torch.rand(n, generator=g), _uniform(g, n, 0.0, 0.5),
                      _uniform(g, n, 0.35, 0.75))
    clutter = (pink_noise(n, 1, size, g) + 0.6 * pink_noise(n, 3, size, g)) / 1.166
    image = base.view(n, 3, 1, 1) + _uniform(g, n, 0.05, 0.15).view(n, 1, 1, 1) * clutter
    image = image * _texture(g, n, grid[0].expand(n, -1, -1), grid[1].expand(n, -1, -1)
                             ).unsqueeze(1)
    for slot in range(2):  # distractor parts: small, any colour, the second in half the images
        u, v, s = _frame(g, n, grid, (0.2, 0.35), math.pi, 1.0)
        kinds = torch.randint(0, len(DISTRACTOR_KINDS), (n,), generator=g)
        shown = torch.ones(n) if slot == 0 else (torch.rand(n, generator=g) < 0.5).float()
        d = torch.stack([_part_distance(k, p, u, v) for k, p in (
            ("disc", (0.0, 0.0, 0.8)), ("box", (0.0, 0.0, 0.7, 0.45)),
            ("tri", (0.0, -0.8, -0.75, 0.6, 0.75, 0.6)))])[kinds, torch.arange(n)]
        colour = hsv_to_rgb(torch.rand(n, generator=g), _uniform(g, n, 0.3, 1.0),
                            _uniform(g, n, 0.3, 1.0))
        mask = _soft(d, 2 / size / s) * _col(shown)
        image = _paint(image, mask, colour, _texture(g, n, u, v))
    # the object: its class's parts, each with a colour near the class hue and a texture
    u, v, s = _frame(g, n, grid, (0.6, 0.9), math.radians(30), 0.9)
    hue0 = label / NUM_CLASSES
    for kind, params in TEMPLATES[label]:
        hue = (hue0 + _uniform(g, n, -HUE_SPREAD, HUE_SPREAD)) % 1.0
        colour = hsv_to_rgb(hue, _uniform(g, n, 0.45, 1.0), _uniform(g, n, 0.45, 1.0))
        mask = _soft(_part_distance(kind, params, u, v), 2 / size / s)
        image = _paint(image, mask, colour, _texture(g, n, u, v))
    # an occluding bar across some of the images, in a colour of the background's kind
    u, v, s = _frame(g, n, grid, (0.5, 0.8), math.pi, 0.6)
    width = _uniform(g, n, 0.1, 0.2)
    shown = (torch.rand(n, generator=g) < OCCLUDED).float()
    mask = _soft(_col(width) - v.abs(), 2 / size / s) * _col(shown)
    occluder = hsv_to_rgb(torch.rand(n, generator=g), _uniform(g, n, 0.0, 0.5),
                          _uniform(g, n, 0.3, 0.8))
    image = _paint(image, mask, occluder, torch.ones_like(u))
    # lighting: gain, a linear gradient in a random direction, a colour cast; pixel noise
    angle = _uniform(g, n, 0, 2 * math.pi)
    ramp = (grid[0].unsqueeze(0) * _col(torch.cos(angle))
            + grid[1].unsqueeze(0) * _col(torch.sin(angle)))
    light = _col(_uniform(g, n, 0.7, 1.2)) * (1 + _col(_uniform(g, n, 0.0, 0.35)) * ramp)
    cast = 1 + 0.1 * (2 * torch.rand(n, 3, 1, 1, generator=g) - 1)
    image = image * light.unsqueeze(1) * cast
    image = image + 0.03 * torch.randn(image.shape, generator=g)
    return image.clamp(0.0, 1.0)


def render_shapes(per_class: int, size: int = 32, seed: int = 0
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(images (N, 3, size, size) float32 in [0, 1], labels (N,) int64): ``per_class``
    images of each class, class by class; a function of ``seed`` alone."""
    require_positive("per_class", per_class)
    require_positive("size", size)
    if size < MIN_SIZE:
        raise ConfigError(f"synthetic shapes need --size {MIN_SIZE} or more, got {size}")
    images = [render_class(c, per_class, size, make_generator(seed, 303, c))
              for c in range(NUM_CLASSES)]
    labels = torch.arange(NUM_CLASSES).repeat_interleave(per_class)
    return torch.cat(images), labels


def load_shapes_data(size: int = NATIVE_SIZE, seed: int = 0, per_class: int = PER_CLASS
                     ) -> ImageData:
    """The data set: ``per_class`` images of each class rendered at ``size`` from ``seed``,
    split train / val / test in the digits' shares (genlab.core.data.search_fractions,
    stratified by the same seed), standardised with the training split's channel statistics;
    its inference facts name the classes (an RGB image file of a shape is predicted as the
    training images were read)."""
    images, labels = render_shapes(per_class, size, seed)
    # rendered class by class: rows interleaved by a seeded permutation, so that a split's
    # first rows (the search's diagnostic batch, a selection rule's fixed batches) hold
    # every class, as the digits' do
    order = torch.randperm(len(labels), generator=make_generator(seed, 304))
    images, labels = images[order], labels[order]
    parts = stratified_split(labels.numpy(), search_fractions(), seed)
    raw = [images[p] for p in parts]
    mean = raw[0].mean(dim=(0, 2, 3))
    std = raw[0].std(dim=(0, 2, 3)).clamp_min(1e-6)
    xs, ys = standardise(raw), [labels[p] for p in parts]
    return ImageData("shapes", Split(xs[0], ys[0]), Split(xs[1], ys[1]), Split(xs[2], ys[2]),
                     NUM_CLASSES, 3, size, inference_record(list(CLASS_NAMES), "RGB", size,
                                                           mean, std))
