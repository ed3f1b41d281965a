"""K-FAC factors of the Fisher for Linear and Conv2d layers, used by CSAM to shape its perturbation.

Per layer with input rows a (a 1 appended when the layer has a bias) and
output-gradient rows delta of the *mean* batch loss (b = batch size, N rows: b for
Linear, b * positions for Conv2d via unfolded patches):
    A = a^T a / N,      G = b * delta^T delta   (= (1/b) sum_i (b delta_i)(b delta_i)^T),
    F_layer ~= A (x) G  (Martens & Grosse 2015; Grosse & Martens 2016 for convolutions).
Running averages: X <- decay * X + (1 - decay) * X_batch (first batch: X_batch).
The damped inverse (A (x) G + damping I)^-1 is applied exactly through the
eigendecompositions A = Q_A diag(d_A) Q_A^T, G = Q_G diag(d_G) Q_G^T:
    F^-1 V = Q_G [(Q_G^T V Q_A) / (d_G d_A^T + damping)] Q_A^T,
with V the layer's gradient-shaped matrix [W | b] (out x in'). Eigendecompositions
are refreshed every ``refresh`` steps. Defaults (damping 1e-3, decay 0.95,
refresh 50) are those of the nonuniformity official code's CSAM; the exact
scaling conventions of A and G are our reconstruction.
Other parameters (norm layers, embeddings, grouped convolutions) get the identity.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

FACTOR_KEYS = ("kfac_A", "kfac_G", "kfac_QA", "kfac_dA", "kfac_QG", "kfac_dG")


def _supported(module: nn.Module) -> bool:
    if isinstance(module, nn.Linear):
        return True
    return isinstance(module, nn.Conv2d) and module.groups == 1 and module.padding_mode == "zeros"


def layer_input_rows(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Rows a of the layer's input (N x in'), with a column of ones for the bias."""
    if isinstance(module, nn.Conv2d):
        patches = F.unfold(x, module.kernel_size, dilation=module.dilation,
                           padding=module.padding, stride=module.stride)   # b, in*k*k, L
        rows = patches.transpose(1, 2).reshape(-1, patches.shape[1])
    else:
        rows = x.reshape(-1, x.shape[-1])
    if module.bias is not None:
        rows = torch.cat([rows, rows.new_ones(rows.shape[0], 1)], dim=1)
    return rows


def layer_output_rows(module: nn.Module, grad: torch.Tensor) -> torch.Tensor:
    """Rows delta of the gradient w.r.t. the layer's output (N x out)."""
    if isinstance(module, nn.Conv2d):
        return grad.permute(0, 2, 3, 1).reshape(-1, grad.shape[1])
    return grad.reshape(-1, grad.shape[-1])


class KFAC:
    """Captures a model's Linear/Conv2d activations and output gradients and keeps A, G.

    Factors live in ``owner.state`` (the optimiser's per-parameter state keyed by
    the layer's weight) so they are checkpointed with the optimiser.
    """

    def __init__(self, model: nn.Module, params: set[torch.Tensor],
                 owner: torch.optim.Optimizer, *, damping: float = 1e-3, decay: float = 0.95,
                 refresh: int = 50):
        self.owner, self.damping, self.decay, self.refresh = owner, damping, decay, refresh
        self.layers = [m for m in model.modules()
                       if _supported(m) and m.weight in params
                       and (m.bias is None or m.bias in params)]
        self._capturing = False
        self._inputs: dict[nn.Module, torch.Tensor] = {}
        self._grads: dict[nn.Module, torch.Tensor] = {}
        self._handles = [m.register_forward_hook(self._forward_hook) for m in self.layers]

    def _forward_hook(self, module, inputs, output) -> None:
        if not self._capturing or not output.requires_grad:
            return
        self._inputs[module] = inputs[0].detach()

        def keep_grad(grad, module=module):
            self._grads[module] = grad.detach()

        output.register_hook(keep_grad)

    @contextmanager
    def capturing(self) -> Iterator[None]:
        """Record layer inputs and output gradients of the passes run inside the block."""
        self._capturing = True
        try:
            yield
        finally:
            self._capturing = False

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Fold the captured batch into the running factors; refresh eigenbases when due."""
        for module in self.layers:
            x, grad = self._inputs.pop(module, None), self._grads.pop(module, None)
            if x is None or grad is None:
                continue
            a = layer_input_rows(module, x)
            delta = layer_output_rows(module, grad)
            batch = x.shape[0]
            A = a.T @ a / a.shape[0]
            G = batch * (delta.T @ delta)
            st = self.owner.state[module.weight]
            if "kfac_A" not in st:
                st["kfac_A"], st["kfac_G"] = A, G
            else:
                st["kfac_A"].mul_(self.decay).add_(A, alpha=1 - self.decay)
                st["kfac_G"].mul_(self.decay).add_(G, alpha=1 - self.decay)
            if step % self.refresh == 0 or "kfac_QA" not in st:
                st["kfac_dA"], st["kfac_QA"] = torch.linalg.eigh(st["kfac_A"])
                st["kfac_dG"], st["kfac_QG"] = torch.linalg.eigh(st["kfac_G"])
                st["kfac_dA"].clamp_(min=0.0)
                st["kfac_dG"].clamp_(min=0.0)

    @torch.no_grad()
    def precondition(self, vectors: dict[torch.Tensor, torch.Tensor]) -> dict:
        """F^-1 v per parameter (layers with factors: K-FAC; all others: identity)."""
        out = dict(vectors)
        for module in self.layers:
            st = self.owner.state.get(module.weight, {})
            w, bias = module.weight, module.bias
            missing_bias = bias is not None and bias not in vectors
            if "kfac_QA" not in st or w not in vectors or missing_bias:
                continue
            V = vectors[w].reshape(w.shape[0], -1)
            if bias is not None:
                V = torch.cat([V, vectors[bias][:, None]], dim=1)
            QA, dA, QG, dG = st["kfac_QA"], st["kfac_dA"], st["kfac_QG"], st["kfac_dG"]
            X = QG.T @ V @ QA
            X = X / (dG[:, None] * dA[None, :] + self.damping)
            P = QG @ X @ QA.T
            if bias is not None:
                out[bias] = P[:, -1].contiguous()
                P = P[:, :-1]
            out[w] = P.reshape(w.shape)
        return out

    def remove(self) -> None:
        """Detach the hooks from the model."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
