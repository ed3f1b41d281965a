"""The nonuniformity section's tables and readings, on made-up study results."""

from genlab.optim.demo import measures_reading, sparse_reading, sparse_rows


def row(name, test_loss, support, recovered=1.0, seeds=1):
    return {"optimizer": name, "seeds": seeds, "train_loss": 0.004, "train_loss_std": 0.001,
            "test_loss": test_loss, "test_loss_std": 0.002, "beta_l1": 3.0, "beta_l1_std": 0.1,
            "support_size": support, "support_size_std": 2.0, "support_recovered": recovered}


def test_sparse_rows_print_an_interval_only_over_several_seeds():
    one = sparse_rows([row("sgd", 0.09, 82.0)])[0]
    assert one["test loss"] == "0.0900" and one["support"] == "82.0"
    assert one["true support found"] == "1/1 seeds"
    five = sparse_rows([row("sgd", 0.09, 82.0, recovered=0.6, seeds=5)])[0]
    assert five["test loss"] == "0.0900 ± 0.0020 (n=5)"
    assert five["true support found"] == "3/5 seeds"


def test_sparse_reading_both_outcomes():
    table = [row("sgd", 0.09, 82.0), row("samgcm", 0.01, 28.0)]
    assert sparse_reading(table, 3) == (
        "Lowest test loss: samgcm (0.0100 vs sgd 0.0900); smallest support: samgcm (28 "
        "coordinates; the true support has 3); every optimiser found the true support in "
        "every seed.")
    table = [row("sgd", 0.01, 82.0), row("sam", 0.05, 40.0, recovered=0.0)]
    text = sparse_reading(table, 3)
    assert text.startswith("Lowest test loss: sgd (0.0100); smallest support: sam (40")
    assert text.endswith("the true support was missed in some seed by: sam.")


def test_measures_reading_is_computed_from_the_measures():
    text = measures_reading({"noise_scale": 212.84, "m_sharpness": 0.0028,
                             "average_sharpness": 0.0004})
    assert "tr Sigma is 213 times" in text
    assert "(0.0028) is 7.0 times the average-case sharpness (0.0004)" in text
    text = measures_reading({"noise_scale": None, "m_sharpness": 0.001,
                             "average_sharpness": -0.002})
    assert text == ("At the end of training the worst-case m-sharpness is 0.0010 and the "
                    "average-case sharpness -0.0020.")
