"""Values several NAS test modules check against, and the in-process CLI runner they share
(imported by name: pytest puts this folder on sys.path). The DARTS genotypes are
quark0/darts's genotypes.py, as printed upstream."""

DARTS_V1 = ("Genotype(normal=[('sep_conv_3x3', 1), ('sep_conv_3x3', 0), ('skip_connect', 0), "
            "('sep_conv_3x3', 1), ('skip_connect', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0), "
            "('skip_connect', 2)], normal_concat=[2, 3, 4, 5], reduce=[('max_pool_3x3', 0), "
            "('max_pool_3x3', 1), ('skip_connect', 2), ('max_pool_3x3', 0), ('max_pool_3x3', 0), "
            "('skip_connect', 2), ('skip_connect', 2), ('avg_pool_3x3', 0)], "
            "reduce_concat=[2, 3, 4, 5])")
DARTS_V2 = ("Genotype(normal=[('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0), "
            "('sep_conv_3x3', 1), ('sep_conv_3x3', 1), ('skip_connect', 0), ('skip_connect', 0), "
            "('dil_conv_3x3', 2)], normal_concat=[2, 3, 4, 5], reduce=[('max_pool_3x3', 0), "
            "('max_pool_3x3', 1), ('skip_connect', 2), ('max_pool_3x3', 1), ('max_pool_3x3', 0), "
            "('skip_connect', 2), ('skip_connect', 2), ('max_pool_3x3', 1)], "
            "reduce_concat=[2, 3, 4, 5])")

# What every search's summary holds at least (an accuracy table adds its own key).
SEARCH_CONTRACT = {"space", "genotype", "param_free_ops", "skip_ops", "mean_entropy",
                   "hessian_eig", "search_seconds", "reg", "seed", "order", "alpha",
                   "arch_weights"}


NB201_CELL = ("|nor_conv_3x3~0|+|skip_connect~0|nor_conv_3x3~1|+|skip_connect~0|none~1|"
              "nor_conv_3x3~2|")


def run_cli(argv, capsys):
    """Exit code, stdout and stderr of ``genlab ARGV`` run in this process."""
    from genlab.cli import main

    capsys.readouterr()
    try:
        main([str(a) for a in argv])
        code = 0
    except SystemExit as exc:
        code = 0 if exc.code is None else exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err
