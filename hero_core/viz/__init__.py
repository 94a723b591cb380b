"""Plotly figures of traces and sweeps, their palette and labels, export, and the pages' words about them."""
