"""Number columns of the app's tables (``st.column_config.NumberColumn``), declared the same way on every page."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

PERCENT_1 = "%.1f %%"  # a share already in percent (0-100), one decimal
FRACTION_AS_PERCENT = "percent"  # a share stored as a fraction (0-1), shown as a percentage


def number_columns(columns: Mapping[str, tuple[str, ...]]) -> dict[str, dict]:
    """One NumberColumn per table column: ``{column: (header[, format[, help]])}``."""
    return {name: number_column(*spec) for name, spec in columns.items()}


def number_column(header: str, number_format: str | None = None, help_text: str | None = None) -> dict:
    """A NumberColumn with this header, format (st.column_config's: printf-style or "percent") and tooltip."""
    return st.column_config.NumberColumn(header, format=number_format, help=help_text)
