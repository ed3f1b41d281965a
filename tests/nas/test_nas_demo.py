"""The NAS section's tables and readings, on made-up bench results (no search runs)."""

import re

from genlab.core.report import Report
from genlab.nas import demo

G1 = "|nor_conv_3x3~0|+|nor_conv_1x1~0|nor_conv_3x3~1|+|nor_conv_1x1~0|none~1|skip_connect~2|"


def record(reg, seed, p_free, c10, digits=95.0):
    return {"reg": reg, "seed": seed, "genotype": G1, "param_free_ops": p_free, "skip_ops": 1,
            "mean_entropy": 1.5, "cifar10": c10, "cifar100": c10 - 20, "imagenet16": c10 - 40,
            "test_acc": digits, "force_ratio": 0.1, "search_seconds": 40.0}


def result(records):
    regs = list(dict.fromkeys(r["reg"] for r in records))
    return {"space": "nb201", "records": records, "constant_test_acc": 10.0,
            "per_reg": {reg: {"runs": sum(r["reg"] == reg for r in records), "agreement": 0.5}
                        for reg in regs}}


def test_reading_when_ber_keeps_fewer_parameter_free_ops_and_is_more_accurate():
    res = result([record("none", 0, 4, 75.0), record("ber", 0, 2, 91.0),
                  record("beta", 0, 0, 93.0)])
    text = demo.reg_reading(demo.reg_means(res), demo.acc_label(res))
    assert text.startswith("ber keeps 2 parameter-free ops vs 4 for none (fewer")
    assert "NB201 CIFAR-10 accuracy is 91.00%, above none's 75.00% (beta 93.00%)" in text
    assert "one seed" in text


def test_reading_when_ber_is_not_better():
    res = result([record("none", 0, 4, 80.0), record("ber", 0, 5, 79.0),
                  record("none", 1, 4, 80.0), record("ber", 1, 5, 79.0)])
    text = demo.reg_reading(demo.reg_means(res), demo.acc_label(res))
    assert "ber keeps 5 parameter-free ops vs 4 for none: more" in text
    assert "it does not reduce the collapse" in text
    assert "79.00%, not above none's 80.00%" in text
    assert "Means over at least 2 seeds" in text
    same = result([record("none", 0, 3, 80.0), record("ber", 0, 3, 80.0)])
    assert "the same number of parameter-free ops (3)" in demo.reg_reading(
        demo.reg_means(same), "x")


def test_reg_rows_print_no_interval_for_one_seed_and_mean_std_for_two():
    one = demo.reg_rows(result([record("none", 0, 4, 75.0), record("ber", 0, 2, 91.0)]))
    assert one[0]["C10 (%)"] == "75.00" and one[0]["p-free ops"] == "4.0"
    assert "agreement" not in one[0] and one[-1]["reg"] == "constant (majority class)"
    assert not any("±" in str(v) for row in one for v in row.values())
    two = demo.reg_rows(result([record("none", 0, 4, 75.0), record("none", 1, 2, 77.0)]))
    assert two[0]["C10 (%)"] == "76.00 ± 1.41 (n=2)" and two[0]["agreement"] == 0.5


def test_run_table_shows_genotypes_as_code_and_reads_the_sanity_row():
    res = result([record("none", 0, 4, 75.0, digits=8.0), record("ber", 0, 2, 91.0)])
    report = Report("t")
    report.table(demo.run_rows(res), digits=2)
    md = report.markdown()
    assert "`" + G1.replace("|", "\\|") + "`" in md
    assert "<code>" in report.html() and "±" not in md
    text = demo.run_reading(res)
    assert text.startswith("Highest NB201 CIFAR-10 accuracy: ber seed 0 (91.00%)")
    assert "not above the majority class on digits (10.00%): none seed 0" in text
    res["records"][0]["test_acc"] = 90.0
    assert "every retrained cell beats the majority class" in demo.run_reading(res)


def test_heading_states_what_was_run():
    assert demo.heading("nb201", ["none", "beta", "ber"], 1, 600) == (
        "NAS-Bench-201 space on digits: DARTS, beta-DARTS and BER, one seed, 600 search steps")
    assert demo.heading("nb201", ["ber"], 3, 60).endswith("BER, 3 seeds, 60 search steps")


def test_readings_without_an_nb201_table_compare_the_digits_accuracy():
    recs = [record("none", 0, 4, 0.0, digits=94.0), record("ber", 0, 2, 0.0, digits=97.5)]
    for r in recs:
        for key in ("cifar10", "cifar100", "imagenet16"):
            r.pop(key)
    res = result(recs)
    text = demo.run_reading(res)
    assert "digits" in text and "ber seed 0 (97.50%)" in text, text
    assert "No run has an accuracy" not in text


def test_bench_markdown_prints_no_interval_for_one_seed():
    from genlab.nas.bench.report import bench_markdown

    res = result([record("none", 0, 4, 90.0), record("ber", 0, 2, 92.0),
                  record("ber", 1, 3, 94.0)])
    res["per_reg"]["none"].update(param_free_ops_mean=4.0, param_free_ops_std=0.0)
    res["per_reg"]["ber"].update(param_free_ops_mean=2.5, param_free_ops_std=0.7071)
    text = bench_markdown(res)
    none_row = next(line for line in text.splitlines() if line.startswith("| none |"))
    ber_row = next(line for line in text.splitlines() if line.startswith("| ber |"))
    assert "±" not in none_row and "| 4.0 |" in none_row, none_row
    assert "2.5 ± 0.7 (n=2)" in ber_row, ber_row


def test_the_test_column_is_named_by_the_benchs_data_set():
    from genlab.nas.bench.report import bench_markdown

    res = result([record("darts", 0, 4, 90.0, digits=71.5)])
    assert "| digits test |" in bench_markdown(res)  # recorded before the name was kept
    res["dataset"] = "shapes"
    text = bench_markdown(res)
    assert "| shapes test |" in text and "digits" not in text, text
    header = next(line for line in text.splitlines() if line.startswith("| reg | seed"))
    row = next(line for line in text.splitlines() if line.startswith("| darts | 0"))
    cells = dict(zip(header.split("|"), re.split(r"(?<!\\)\|", row), strict=True))
    assert cells[" shapes test "].strip() == "71.50"
    res["dataset"] = "folder:/data/mine"
    assert "| folder test |" in bench_markdown(res)
