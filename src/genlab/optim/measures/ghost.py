"""Per-sample gradient quantities from one forward and one backward pass ("ghost" computations).

With per-sample losses L_1..L_b of a batch and g_i = grad L_i, many quantities need only
inner products or weighted sums of the g_i, never the (b, d) matrix G of all of them:

- ||g_i||^2 (tr Sigma, gradient diversity, COV's penalty),
- the Gram matrix K = G G^T (SAMGCM's Woodbury solve),
- sum_i w_i g_i (the mean gradient, SAMGCM's direction G^T z).

A layer's share of each is computed from the layer's input and the gradient of sum_i L_i
with respect to its output (ghost_rules.py), recorded by forward hooks during the batch's
ordinary forward pass; sums over layers give the whole-model figure, since a per-sample
gradient is the concatenation of its layers' parts. One backward pass to the layer
outputs serves every layer. With ``create_graph=True`` the results are differentiable
(COV differentiates sum_i ||g_i||^2).

Requirements (checked, else :class:`LayerPathUnavailable`): every trainable parameter
belongs to exactly one module and is used only inside that module's forward (checked on the
first batch a model is used with, once per process: the per-layer sum over samples must
equal the batch gradient);
recorded layer inputs and outputs are not modified in place afterwards. Samples must not interact
in the forward pass for the results to be the per-sample gradients of each L_i; with
BatchNorm in training mode they are the per-sample contributions to the batch gradient
(mean exactly the batch gradient; our definition for that case: each L_i's own derivative
through the batch statistics has no cheap form).
"""

from __future__ import annotations

import contextlib
import copy
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import vmap

from genlab.optim.measures.ghost_rules import DenseGrads, MatmulFactors, rule_for


class LayerPathUnavailable(RuntimeError):
    """The model (or this call) does not meet the requirements of the per-layer path."""


#: models whose parameter use was confirmed by a checked batch (checked once per process)
_CHECKED: weakref.WeakSet = weakref.WeakSet()


@dataclass
class _Site:
    module: nn.Module
    args: tuple
    kwargs: dict
    output: torch.Tensor
    versions: tuple[int, ...]


def _own_params(module: nn.Module, trainable: set) -> list[torch.Tensor]:
    return [p for p in module._parameters.values() if p is not None and p in trainable]


class LayerRecorder:
    """Forward hooks on the modules that own ``params``; they record only inside ``recording()``.

    ``covers`` tells whether every parameter has one owner module (else the per-layer path
    cannot be used for this model and callers fall back to autograd per sample).
    """

    def __init__(self, model: nn.Module, params: Iterable[torch.Tensor] | None = None):
        trainable = [p for p in (model.parameters() if params is None else params)
                     if p.requires_grad]
        wanted = set(trainable)
        self.params = trainable
        self.owned: dict[nn.Module, list[torch.Tensor]] = {}
        seen: dict[torch.Tensor, int] = {}
        for module in model.modules():
            own = _own_params(module, wanted)
            if own:
                self.owned[module] = own
                for p in own:
                    seen[p] = seen.get(p, 0) + 1
        self.covers = (all(seen.get(p, 0) == 1 for p in trainable)
                       and len(set(map(id, trainable))) == len(trainable))
        self.model = model
        self.validated = model in _CHECKED  # ownership confirmed by a checked batch
        self._active = False
        self._sites: list[_Site] = []
        self._handles = [m.register_forward_hook(self._hook, with_kwargs=True)
                         for m in self.owned]

    def _hook(self, module, args, kwargs, output) -> None:
        if not self._active:
            return
        if not isinstance(output, torch.Tensor) or not output.requires_grad:
            return
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        self._sites.append(_Site(module, args, kwargs, output,
                                 tuple(t._version for t in [output, *tensors])))

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Record the layer calls of the forward passes run inside the block (forgets older)."""
        self._sites = []
        self._active = True
        try:
            yield
        finally:
            self._active = False

    def take_sites(self) -> list[_Site]:
        sites, self._sites = self._sites, []
        return sites

    def remove(self) -> None:
        """Detach the hooks from the model."""
        for h in self._handles:
            h.remove()
        self._handles = []


class PerSampleGrads:
    """The per-sample gradients of one batch, kept per layer in factored form."""

    def __init__(self, layers: list[MatmulFactors | DenseGrads], batch: int,
                 device: torch.device, dtype: torch.dtype):
        self.layers, self.batch, self.device, self.dtype = layers, batch, device, dtype

    def sq_norms(self) -> torch.Tensor:
        """(b,) ||g_i||^2."""
        total = torch.zeros(self.batch, device=self.device, dtype=self.dtype)
        for layer in self.layers:
            total = total + layer.sq_norms()
        return total

    def gram(self) -> torch.Tensor:
        """(b, b) <g_i, g_j>."""
        total = torch.zeros(self.batch, self.batch, device=self.device, dtype=self.dtype)
        for layer in self.layers:
            total = total + layer.gram()
        return total

    def weighted_sum(self, weights: torch.Tensor) -> dict[torch.Tensor, torch.Tensor]:
        """{parameter: sum_i w_i g_i}; parameters the batch did not use are absent."""
        out: dict[torch.Tensor, torch.Tensor] = {}
        for layer in self.layers:
            for p, t in zip(layer.params, layer.weighted_sum(weights), strict=True):
                out[p] = out[p] + t if p in out else t
        return out

    @torch.no_grad()
    def materialise(self, params: list[torch.Tensor], out: torch.Tensor | None = None
                    ) -> torch.Tensor:
        """(b, d) per-sample gradients (not differentiable), columns in the order of
        ``params`` (zeros for parameters the batch did not use); into ``out`` when given."""
        if out is None:
            d = sum(p.numel() for p in params)
            out = torch.empty(self.batch, d, device=self.device, dtype=self.dtype)
        blocks, start = {}, 0
        for p in params:
            blocks[p] = out[:, start:start + p.numel()]
            start += p.numel()
        written: set = set()
        for layer in self.layers:  # each parameter has one owner layer (LayerRecorder.covers)
            layer.write_into([blocks[p] for p in layer.params])
            written.update(layer.params)
        for p in params:
            if p not in written:
                blocks[p].zero_()
        return out


def _merge(factors: list) -> MatmulFactors | DenseGrads:
    """One module called several times: concatenate positions (matmul) or add (dense)."""
    if len(factors) == 1:
        return factors[0]
    if all(isinstance(f, MatmulFactors) for f in factors):
        def rows(sl, parts=tuple(f.rows for f in factors)):
            return torch.cat([r(sl) for r in parts], 1)

        return MatmulFactors(factors[0].params, rows, torch.cat([f.B for f in factors], 1),
                             factors[0].k)
    dense = [f if isinstance(f, DenseGrads) else
             DenseGrads(f.params, torch.cat([m.reshape(m.shape[0], -1)
                                             for m in f.materialise()], 1))
             for f in factors]
    return DenseGrads(dense[0].params, sum(f.G for f in dense))


def per_sample_factors(recorder: LayerRecorder, losses: torch.Tensor, *,
                       create_graph: bool = False, dtype: torch.dtype | None = None
                       ) -> PerSampleGrads:
    """Per-layer factors of the per-sample gradients of ``losses`` (shape (b,)).

    ``losses`` must come from a forward pass run inside ``recorder.recording()``. With
    ``create_graph`` the factors stay differentiable and the graph of ``losses`` is kept
    (else it is freed, except on the recorder's first, checked batch: a caller that gets
    LayerPathUnavailable can still differentiate ``losses`` another way); ``dtype`` (e.g.
    float64) is the precision of the per-layer products.
    """
    if not recorder.covers:
        raise LayerPathUnavailable("some trainable parameters have no single owner module")
    sites = recorder.take_sites()
    if losses.ndim != 1:
        raise LayerPathUnavailable(f"per-sample losses must have shape (b,), got "
                                   f"{tuple(losses.shape)}")
    b = losses.shape[0]
    dtype = dtype or losses.dtype
    for s in sites:
        tensors = [a for a in s.args if isinstance(a, torch.Tensor)]
        now = tuple(t._version for t in [s.output, *tensors])
        if now != s.versions:
            raise LayerPathUnavailable(f"the input or output of {type(s.module).__name__} was "
                                       "modified in place after the layer ran")
        if s.output.shape[0] != b:
            raise LayerPathUnavailable(f"{type(s.module).__name__} output has batch size "
                                       f"{s.output.shape[0]}, the losses {b}")
    outputs = [s.output for s in sites]
    check = [] if recorder.validated else recorder.params
    grads = torch.autograd.grad(losses.sum(), outputs + check, allow_unused=True,
                                create_graph=create_graph,
                                retain_graph=create_graph or bool(check)
                                ) if outputs + check else []
    grads, truth = grads[:len(outputs)], grads[len(outputs):]
    by_module: dict[nn.Module, list] = {}
    with torch.set_grad_enabled(create_graph):
        for s, g in zip(sites, grads, strict=True):
            if g is None:
                continue
            rule = rule_for(s.module)
            by_module.setdefault(s.module, []).append(
                rule(s.module, s.args, s.kwargs, g, recorder.owned[s.module], dtype))
        layers = [_merge(fs) for fs in by_module.values()]
    psg = PerSampleGrads(layers, b, losses.device, dtype)
    if check:
        _validate(psg, recorder.params, truth)
        recorder.validated = True
        _CHECKED.add(recorder.model)
    return psg


def _validate(psg: PerSampleGrads, params: list[torch.Tensor], truth) -> None:
    """The per-layer sum over samples must be the batch gradient (else a parameter is used
    outside its module, e.g. a weight tied by a functional call). Tolerance: 1e-3 of the
    larger of the parameter's own gradient scale and 1e-3 of the largest one (a gradient
    that is zero up to rounding, e.g. a bias before BatchNorm, is not compared bit by bit)."""
    with torch.no_grad():
        total = psg.weighted_sum(torch.ones(psg.batch, device=psg.device, dtype=psg.dtype))
        pairs = []
        for p, g in zip(params, truth, strict=True):
            ours = total.get(p)
            if g is None and ours is None:
                continue
            g = torch.zeros_like(p) if g is None else g.detach()
            ours = torch.zeros_like(g) if ours is None else ours.to(g.dtype)
            pairs.append((p, g, ours, max(float(g.abs().max()), float(ours.abs().max()))))
        largest = max((scale for *_, scale in pairs), default=0.0)
        for p, g, ours, scale in pairs:
            if float((ours - g).abs().max()) > 1e-3 * max(scale, 1e-3 * largest, 1e-30):
                raise LayerPathUnavailable(
                    f"a parameter of shape {tuple(p.shape)} is used outside the module that "
                    "owns it (e.g. a tied weight)")


def _unreduced(loss_fn: Callable) -> Callable | None:
    """A copy of a mean-reduced, unweighted torch loss with reduction='none', else None."""
    if (isinstance(loss_fn, nn.modules.loss._Loss) and loss_fn.reduction == "mean"
            and getattr(loss_fn, "weight", None) is None):
        unreduced = copy.copy(loss_fn)
        unreduced.reduction = "none"
        return unreduced
    return None


def per_sample_losses(loss_fn: Callable, outputs: torch.Tensor, targets: torch.Tensor
                      ) -> torch.Tensor:
    """(b,) losses of each sample from a mean-reduced ``loss_fn``: loss_fn(out_i[None], y_i[None]).

    A torch loss without class weights is called once with reduction='none' (and averaged
    over each sample's elements); any other callable is vmapped over the samples.
    """
    b = outputs.shape[0]
    unreduced = _unreduced(loss_fn)
    if unreduced is not None:
        losses = unreduced(outputs, targets)
        if losses.ndim >= 1 and losses.shape[0] == b:
            return losses.reshape(b, -1).mean(1)

    def one(o, t):
        return loss_fn(o.unsqueeze(0), t.unsqueeze(0))

    try:
        return vmap(one)(outputs, targets)
    except (RuntimeError, NotImplementedError):
        return torch.stack([one(o, t) for o, t in zip(outputs, targets, strict=True)])
