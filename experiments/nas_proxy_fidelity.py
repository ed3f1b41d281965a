"""Proxy fidelity: does retraining on an embedded proxy rank NB201 cells the way CIFAR-10 does?

The study is genlab.nas.studies.proxy_fidelity (its docstring says what it measures and how to
run it); this script runs it: `python experiments/nas_proxy_fidelity.py --help`.
"""

from genlab.nas.studies.proxy_fidelity import main

if __name__ == "__main__":
    main()
