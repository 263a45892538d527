# SPDX-License-Identifier: BSD-3-Clause
"""Column dicts from the engine -> pandas DataFrames, or dicts of NumPy arrays without pandas."""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # pandas is optional
    import pandas as pd
except ImportError:  # pragma: no cover - exercised by the no-pandas test run
    pd = None


def _column(values: Any) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return values
    out = np.empty(len(values), dtype=object)  # strings (None where absent) stay Python objects
    out[:] = values
    return out


def frame(columns: dict[str, Any], categorical: dict[str, tuple[np.ndarray, Any]] | None = None,
          order: list[str] | None = None):
    """A DataFrame of the engine's columns (pandas), else a dict of NumPy arrays.

    categorical: column -> (int32 codes, texts); code -1 is a missing value. With pandas they
    become pandas.Categorical columns (no Python object per row); without, object arrays.
    order: column names first in this order (the others follow as given).
    """
    merged: dict[str, Any] = dict(columns)
    for name, (codes, texts) in (categorical or {}).items():
        merged[name] = (codes, list(texts))
    names = list(merged)
    if order:
        names = [c for c in order if c in merged] + [c for c in names if c not in order]
    out: dict[str, Any] = {}
    for name in names:
        value = merged[name]
        if isinstance(value, tuple):
            codes, texts = value
            if pd is not None:
                out[name] = pd.Categorical.from_codes(codes, categories=texts)
            else:
                lookup = np.empty(len(texts) + 1, dtype=object)
                lookup[:-1] = texts
                lookup[-1] = None  # code -1
                out[name] = lookup[codes]
        else:
            out[name] = _column(value)
    if pd is None:
        return out
    return pd.DataFrame(out, copy=False)


def concat(frames: list):
    """Concatenates DataFrames (or dicts of arrays) row-wise; categorical columns stay
    categorical (their categories united)."""
    if pd is not None:
        if not frames:
            return pd.DataFrame()
        shared = set(frames[0].columns).intersection(*[set(f.columns) for f in frames[1:]])
        united = {}
        for c in shared:
            if all(isinstance(f[c].dtype, pd.CategoricalDtype) for f in frames):
                united[c] = pd.api.types.union_categoricals([f[c] for f in frames], ignore_order=True)
        out = pd.concat(frames, ignore_index=True)
        for c, values in united.items():
            out[c] = values
        return out[list(frames[0].columns) + [c for c in out.columns if c not in frames[0].columns]]
    if not frames:
        return {}
    names: list[str] = []
    for f in frames:
        names += [c for c in f if c not in names]
    return {c: np.concatenate([_column(f[c]) if c in f else np.full(len(next(iter(f.values()), [])), None)
                               for f in frames]) for c in names}
