"""Selection of BER: the protocol of docs/ber.md ("Selection protocol"), run for a grid of settings.

The study is genlab.nas.studies.ber_select (its docstring says what it measures and how to run it);
this script runs it: `python experiments/nas_ber_select.py --help`.
"""

from genlab.nas.studies.ber_select import main

if __name__ == "__main__":
    main()
