"""Does the batch entropy of the search cells peak before the parameter-free ops start to rise?

The study is genlab.nas.studies.entropy_peak (its docstring says what it measures and how to
run it); this script runs it: `python experiments/nas_entropy_peak.py --help`.
"""

from genlab.nas.studies.entropy_peak import main

if __name__ == "__main__":
    main()
