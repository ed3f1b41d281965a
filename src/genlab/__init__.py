"""genlab: three AAAI-26 methods for better generalization, made usable.

- genlab.nas: BER differentiable architecture search and its collapse diagnostics.
- genlab.optim: nonuniformity measures and nonuniformity-guided optimisers (with SAM, ASAM).
- genlab.gaze: MoEGaze, appearance-routed experts for cross-domain gaze estimation.
"""

from genlab.version import __version__

__all__ = ["__version__", "load", "LoadedRun"]


def __getattr__(name: str):
    # genlab.load (and LoadedRun) without importing torch at `import genlab`.
    if name in ("load", "LoadedRun"):
        from genlab import loading

        return getattr(loading, name)
    raise AttributeError(f"module 'genlab' has no attribute {name!r}")
