"""How far does `genlab nas search --reg ber --seed 0` move with threads and with last-bit noise?

The study is genlab.nas.studies.repro (its docstring says what it measures and how to run it);
this script runs it: `python experiments/nas_repro.py --help`.
"""

from genlab.nas.studies.repro import main

if __name__ == "__main__":
    main()
