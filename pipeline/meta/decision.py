"""How a meta-model's regression output becomes a rank group: rounding, cut points, or ordinal.

The meta-models regress the group index (Kuboki et al. 2025) and the paper rounds the output to
the nearest group. A regression pulls both ends of the range toward the middle (the weakest
and the strongest group are predicted too high and too low), so plain rounding loses the ends:
chess's 1000-1200 band and Go's 3-5k group read worst. Cut points fitted on the monitoring
samples (those the model was not fitted on) put each boundary where the groups on either side
are told apart best: the G - 1 thresholds that classify the most monitoring samples right, a
monotone step function found exactly by dynamic programming over the sorted outputs.

An ordinal decision replaces the regression instead of cutting it (Frank & Hall 2001): G − 1
binary models of P(group > k), each fitted on the same training samples, keep the order of the
groups but no distance between them, so no end is pulled toward the middle; the group is the
median of the distribution they give.

    cuts = fit_cut_points(raw_validation, labels_validation, groups)
    predicted = apply_cut_points(raw, cuts)          # rounding: rounding_cut_points(groups)
    above = fit_ordinal(train_x, train_label, groups, params)
    predicted = ordinal_groups(ordinal_above(above, x))
    one = fit_extended_ordinal(train_x, train_label, groups, params)
    predicted = ordinal_groups(extended_above(one, x, groups))

One model can hold all G − 1 (Li & Lin 2007): each sample once per threshold k, with k as a
feature and a monotone constraint that keeps P(group > k) non-increasing in k. It is what a
trained model carries at the n where it gains (``MetaConfig.ordinal_ns``, each game kind's
default in ``pipeline/kinds/``; chess from one game): one file beside the regressor's
(:func:`ordinal_file`), where G − 1 models would be seven times the regressor's 1.2 MB for
chess; the regression output stays the continuous reading. Cut points are measured only.

"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import lightgbm as lgb

DECISIONS = ("rounding", "cuts", "ordinal")


def ordinal_file(model_file: str) -> str:
    """The file of the ordinal model of the regressor saved as ``model_file``
    (``models/full/n5.txt`` → ``models/full/n5-ordinal.txt``), as the manifest names files."""
    return f"{model_file.removesuffix('.txt')}-ordinal.txt"


def rounding_cut_points(groups: int) -> np.ndarray:
    """(G - 1,) the thresholds of plain rounding: 0.5, 1.5, …"""
    return np.arange(groups - 1) + 0.5


def apply_cut_points(raw: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Group index of each output: the number of thresholds it lies above (a value on a
    threshold goes to the lower group, as rounding sends 0.5 to 0)."""
    return np.searchsorted(np.asarray(cuts, dtype=np.float64), raw, side="left").astype(np.int64)


def fit_cut_points(raw: np.ndarray, label: np.ndarray, groups: int) -> np.ndarray:
    """(G - 1,) non-decreasing thresholds on ``raw`` that classify the most of ``label`` right.

    Samples with the same output must share a group, so the dynamic programme runs over the
    distinct outputs in order, each with its count per label: ``best[g][i]`` is the most right
    with groups ``0 … g`` over the first ``i`` distinct values, and ``best[g][i] =
    right_g(i) + max_{j ≤ i} (best[g - 1][j] - right_g(j))``, where ``right_g`` counts the
    samples of label g. A group no output falls in gets an empty interval (two equal cuts).
    Thresholds sit halfway between the distinct outputs on either side of a boundary; ties
    between equally good cuts go to the cut nearest plain rounding's."""
    raw = np.asarray(raw, dtype=np.float64)
    label = np.asarray(label, dtype=np.int64)
    if raw.size == 0 or groups < 2:
        return rounding_cut_points(groups)
    values, inverse = np.unique(raw, return_inverse=True)
    counts = np.zeros((len(values), groups), dtype=np.int64)
    np.add.at(counts, (inverse, label), 1)
    prefix = np.vstack([np.zeros((1, groups), np.int64), np.cumsum(counts, axis=0)])  # (V+1, G)
    v = len(values)
    best = np.full((groups, v + 1), -1, dtype=np.int64)
    choice = np.zeros((groups, v + 1), dtype=np.int64)  # where group g starts, for each end i
    best[0] = prefix[:, 0]
    rounding = rounding_cut_points(groups)
    # where each boundary would fall in the distinct values under plain rounding (tie-break)
    natural = np.searchsorted(values, rounding, side="right")
    for g in range(1, groups):
        score = best[g - 1] - prefix[:, g]  # (V+1,) value of starting group g at index j
        running, arg = -np.inf, 0
        for i in range(v + 1):
            s = score[i]
            if s > running or (
                s == running and abs(i - natural[g - 1]) < abs(arg - natural[g - 1])
            ):
                running, arg = s, i
            best[g, i] = prefix[i, g] + running
            choice[g, i] = arg
    starts = np.empty(groups, dtype=np.int64)  # index of the first distinct value of group g
    end = v
    for g in range(groups - 1, 0, -1):
        starts[g] = choice[g, end]
        end = starts[g]
    starts[0] = 0
    edges = np.concatenate([[-np.inf], values, [np.inf]])
    # the threshold below group g's first value: halfway from the previous distinct value
    low, high = edges[starts[1:]], edges[starts[1:] + 1]
    cuts = np.where(np.isfinite(low) & np.isfinite(high), (low + high) / 2,
                    np.where(np.isfinite(high), high - 0.5, low + 0.5))  # fmt: skip
    return np.maximum.accumulate(cuts)


def fit_ordinal(
    features: np.ndarray, label: np.ndarray, groups: int, params: dict
) -> list[lgb.Booster]:
    """The G − 1 LightGBM models of P(group > k), k = 0 … G − 2, on (``features``, ``label``)
    with the regressors' ``params`` and a binary objective (measured only: the meta-models
    carry :func:`fit_extended_ordinal`'s one model)."""
    import lightgbm as lgb  # here, not at the top: the CLI parses options without it

    params = params | {"objective": "binary"}
    label = np.asarray(label)
    return [
        lgb.train(params, lgb.Dataset(features, label=(label > k).astype(np.float64)))
        for k in range(groups - 1)
    ]


def ordinal_above(models: list[lgb.Booster], features: np.ndarray) -> np.ndarray:
    """(S, G − 1) P(group > k) from the ordinal ``models``, made non-increasing in k (each model
    is fitted alone, so a sample's probabilities can cross; the running minimum uncrosses them)."""
    above = np.column_stack([model.predict(features) for model in models])
    return np.minimum.accumulate(above, axis=1)


def ordinal_groups(above: np.ndarray) -> np.ndarray:
    """(S,) each sample's group: the median of its distribution, the number of k with
    P(group > k) ≥ 0.5."""
    return (np.asarray(above) >= 0.5).sum(axis=1).astype(np.int64)


def extended_rows(features: np.ndarray, groups: int) -> np.ndarray:
    """(S · (G − 1), F + 1) each sample once per threshold k, with k as its last column (rows
    k-major: threshold 0's S rows first), the inputs of :func:`fit_extended_ordinal`."""
    features = np.asarray(features, dtype=np.float64)
    k = np.repeat(np.arange(groups - 1, dtype=np.float64), len(features))
    return np.column_stack([np.tile(features, (groups - 1, 1)), k])


def fit_extended_ordinal(
    features: np.ndarray, label: np.ndarray, groups: int, params: dict
) -> lgb.Booster:
    """One LightGBM model of P(group > k) for every k (Li & Lin 2007, ordinal regression by
    extended binary classification): fitted on each sample once per k with k as a feature and
    the label group > k, and held non-increasing in k by a monotone constraint, so one file
    replaces the G − 1 of :func:`fit_ordinal` and the probabilities never cross."""
    import lightgbm as lgb  # here, not at the top: the CLI parses options without it

    width = np.asarray(features).shape[1]
    params = params | {"objective": "binary", "monotone_constraints": [0] * width + [-1]}
    rows = extended_rows(features, groups)
    above = np.tile(np.asarray(label), groups - 1) > rows[:, -1]
    return lgb.train(params, lgb.Dataset(rows, label=above.astype(np.float64)))


def extended_above(model: lgb.Booster, features: np.ndarray, groups: int) -> np.ndarray:
    """(S, G − 1) P(group > k) from :func:`fit_extended_ordinal`'s model."""
    return model.predict(extended_rows(features, groups)).reshape(groups - 1, -1).T
