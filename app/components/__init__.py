"""Reusable pieces of the HeRo Lens app: settings, cached model calls, widgets, exports.

Logic that does not need Streamlit lives in ``hero_core`` (figures, attribution); these helpers only
wire it to widgets. Every widget key starts with its component's prefix.
"""
