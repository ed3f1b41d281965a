"""BER and differentiable architecture search (DARTS family) with collapse diagnostics.

Public API: ``build_supernet(space, method="darts", num_classes=10, channels=None,
cells=None)`` (a method's supernet, genlab.nas.methods; ``genlab nas methods`` lists them);
``get_space(name)`` for nb201, darts, darts-7op, s1, s2, s3, s4, mobilenet
(``space.build_supernet``, ``parse``/``format``/``derive``, ``build_network``);
``build_darts_network(genotype, num_classes, C=36, layers=20, auxiliary=True,
drop_path=0.2)``; ``build_network(arch_string, num_classes, C=16, N=5, in_channels=3)``
(NB201); ``Probe``/``CellTrace`` (what search cells compute); ``Genotype``, ``NB201SuperNet``,
``NB201Table``, ``SearchConfig``/``run_search``, ``RetrainConfig``/``retrain``,
``BenchConfig``/``run_bench``, ``make_regularizer``; ``build_space_supernet`` /
``build_space_network`` (the builders by space name that checkpoints' model records name,
so ``genlab.load`` rebuilds a searched supernet or a retrained network); ``build_backbone``
(a searched network as a detection backbone, timm's features_only); ``load_image_data``.
docs/api/nas.md lists every public name by sub-module.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    # spaces: the registry, its look-up and the builders by name
    "SPACES": "genlab.nas.spaces",
    "get_space": "genlab.nas.spaces",
    "space_names": "genlab.nas.spaces",
    "build_space_supernet": "genlab.nas.spaces",
    "build_space_network": "genlab.nas.spaces",
    "build_backbone": "genlab.nas.spaces.backbone",
    "SearchSpace": "genlab.nas.spaces",
    # NAS-Bench-201
    "build_network": "genlab.nas.spaces.nb201.network",
    "Genotype": "genlab.nas.spaces.nb201.genotype",
    "derive_genotype": "genlab.nas.spaces.nb201.genotype",
    "NB201SuperNet": "genlab.nas.spaces.nb201.supernet",
    "NB201Table": "genlab.nas.spaces.nb201.table",
    # DARTS family
    "build_darts_network": "genlab.nas.spaces.darts.network",
    "parse_darts_genotype": "genlab.nas.spaces.darts.genotype",
    "DartsGenotype": "genlab.nas.spaces.darts.genotype",
    "DartsSuperNet": "genlab.nas.spaces.darts.supernet",
    # MobileNet-like
    "MobileNetSuperNet": "genlab.nas.spaces.mobilenet.network",
    "MobileNetNetwork": "genlab.nas.spaces.mobilenet.network",
    # methods: the DAS methods as compositions of parts, and their supernets
    "build_supernet": "genlab.nas.methods",
    "get_method": "genlab.nas.methods",
    "method_names": "genlab.nas.methods",
    "METHODS": "genlab.nas.methods",
    # probes, regularisers, data sets
    "Probe": "genlab.nas.supernet.probe",
    "CellTrace": "genlab.nas.supernet.probe",
    "make_regularizer": "genlab.nas.regularizers",
    "Regularizer": "genlab.nas.regularizers",
    "PENALTIES": "genlab.nas.regularizers",
    "DATASETS": "genlab.nas.data",
    "load_image_data": "genlab.nas.data",
    # runs
    "SearchConfig": "genlab.nas.search",
    "run_search": "genlab.nas.search",
    "RetrainConfig": "genlab.nas.retrain",
    "retrain": "genlab.nas.retrain",
    "BenchConfig": "genlab.nas.bench",
    "run_bench": "genlab.nas.bench",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """Import the submodule holding ``name`` on first use (keeps `import genlab.nas` light)."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'genlab.nas' has no attribute {name!r}")
