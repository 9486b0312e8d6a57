"""The cocoon experiment's direction (issue 3), on a small fast configuration."""

import numpy as np
from capabilities import need_module

need_module("torch")
from socialgym.experiments.studies.cocoon import CocoonArgs, analyze, run_study  # noqa: E402


def test_mf_cocoon_and_random_replacement_order(tmp_path):
    args = CocoonArgs(agents=20, rounds=14, topics=6, intervene_from=8, replicates=2, replacements=(1, 3, 5))
    run_study(args, tmp_path / "study")
    res = analyze(tmp_path / "study")
    cond = res["conditions"]
    base = cond["no intervention"]
    # entropy under MF falls from its peak by a clear margin (at least half of it)
    assert base["final_entropy"] < 0.5 * base["peak_entropy"], base
    after = [cond[k]["mean_entropy_after_intervention"] for k in
             ("no intervention", "replace 1", "replace 3", "replace 5")]
    # each replacement level above the one before, with visible gaps
    assert all(b > a + 0.1 for a, b in zip(after, after[1:])), after
    # the dose is what was asked: n items x 20 agents x rounds 8..14 (7 feeds) per seed
    for n in (1, 3, 5):
        assert cond[f"replace {n}"]["replaced_items"] == [n * 20 * 7] * 2
    # the curves before the intervention are identical (same seeds, same model)
    pre = np.array(base["round"]) < args.intervene_from
    np.testing.assert_allclose(np.array(cond["replace 5"]["entropy"])[pre], np.array(base["entropy"])[pre])
    assert all((tmp_path / "study" / name).stat().st_size > 1000 for name in ("entropy.png", "deep_cocoon.png"))
