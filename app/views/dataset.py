"""Data set: one or more checkpoints over a whole file of prompts — where they skip, and what it costs."""

import streamlit as st
from components import dataset as ds
from components import settings as app_settings
from components.charts import show_chart
from components.exports import export_panel, safe_filename

from hero_core.eval.sweep.prompt_sets import BUNDLED_SETS
from hero_core.eval.sweep.run import table_bytes
from hero_core.viz.sweep_figures import (
    sweep_category_skip,
    sweep_item_quality,
    sweep_layer_skip,
    sweep_matched_bars,
    sweep_position_skip,
)
from hero_core.words.ratio_text import interval_text

P = "dataset"
SOURCES = ("bundled", "upload")

if st.session_state.pop(ds.OPEN_FLAG, False):
    st.switch_page("views/explorer.py")

st.title("Data set")
st.caption("Route every prompt of a data set under one or more checkpoints: per-layer and per-category skip "
           "rates, quality against the dense model per item, and the runs compared at equal compute.")
settings = app_settings.current()

# the bundled set and its size are part of the shareable URL (?set=code&n=20); an uploaded file cannot be
if f"{P}_source" not in st.session_state and st.query_params.get("set") in BUNDLED_SETS:
    st.session_state[f"{P}_source"] = "bundled"
    st.session_state[f"{P}_set"] = st.query_params["set"]
    n_param = st.query_params.get("n", "")
    if n_param.isdigit() and 1 <= int(n_param) <= 500:
        st.session_state[f"{P}_n"] = int(n_param)
source = st.radio("Prompts", SOURCES, horizontal=True, key=f"{P}_source",
                  format_func={"bundled": "A bundled held-out set", "upload": "Upload a file"}.get)
if source == "bundled":
    cols = st.columns([3, 1])
    name = cols[0].selectbox("Set", BUNDLED_SETS, format_func=ds.SET_LABELS.get, key=f"{P}_set")
    n = int(cols[1].number_input("Items", 1, 500, 20, key=f"{P}_n"))
    items = ds.bundled(name, n, settings.model)
    st.query_params["set"], st.query_params["n"] = name, str(n)
else:
    st.query_params.pop("set", None)
    st.query_params.pop("n", None)
    files = st.file_uploader("Prompt files", type=["jsonl", "json", "csv", "txt"], accept_multiple_files=True,
                             key=f"{P}_files", help="JSONL: one object a line with a `prompt` (or `text`, `input`, "
                                                    "`question`) field, optional `id` and `domain`. CSV: a header "
                                                    "with one of those columns. TXT: one prompt a line.")
    if not files:
        st.info("Upload one or more files of prompts, or choose a bundled set.")
        st.stop()
    items = ds.uploaded(files)
st.caption(f"{len(items)} prompts · first: “{items[0].text[:100]}”")

options, default_runs = ds.run_options()
ds.restore_settings(P, options)
runs = ds.pick_runs(settings, prefix=P)
if not runs:
    st.info("Choose at least one run.")
    st.stop()
cols = st.columns(3)
max_tokens = int(cols[0].number_input("Max tokens per prompt", 16, 2048, step=16, key=f"{P}_max_tokens",
                                      **ds.initial(f"{P}_max_tokens", 256)))
chat = cols[1].toggle("Chat template", key=f"{P}_chat")
matched = cols[2].toggle("Match compute", key=f"{P}_match", disabled=len(runs) < 2,
                         **ds.initial(f"{P}_match", len(runs) > 1),
                         help=f"Also run every other run at the param skip **{runs[0].label}** realised on each item "
                              "(τ bisected per item), so quality compares at equal compute. Slower: about 12 "
                              "extra passes per item and run.")
ds.write_settings({"runs": ",".join(r.label for r in runs), "max_tokens": str(max_tokens),
                   "set_chat": str(int(chat)), "match": str(int(matched))},
                  {"runs": ",".join(default_runs), "max_tokens": "256", "set_chat": "0",
                   "match": str(int(len(runs) > 1))})
result = ds.run_dataset(runs, items, max_tokens=max_tokens, chat=chat, matched=matched and len(runs) > 1, prefix=P)
if result is None:
    st.stop()

quality = result.quality()
metric_cols = st.columns(min(len(quality), 4) or 1)
for i, row in quality.head(4).iterrows():
    # token 0 (the attention sink) skips most FFNs, so short prompts inflate the pooled figure: show both. The
    # detail goes in a caption under the chip: a long delta text was cut off on the chip.
    metric_cols[i].metric(row.run, f"{row.param_skip:.1%} skip", f"ppl ratio {row.perplexity_ratio:.3f}",
                          delta_color="off", delta_arrow="off",
                          help="Token-weighted param skip over every token, and over every token but each item's "
                               "first (the attention sink, which skips most FFNs and lifts the figure on short "
                               "prompts); the perplexity ratio to dense pooled over items with its 95 % bootstrap "
                               "interval over items.")
    metric_cols[i].caption(f"{row.param_skip_excluding_first_token:.1%} without each item's first token · ppl ratio "
                           f"95 % CI {interval_text(row.ratio_low, row.ratio_high)}")
figures = {"layer skip": sweep_layer_skip(result), "category skip": sweep_category_skip(result),
           "position skip": sweep_position_skip(result), "item quality": sweep_item_quality(result),
           "ratio to dense": sweep_matched_bars(result)}
left, right = st.columns(2)
show_chart(left, figures["layer skip"], key=f"{P}_layers")
show_chart(right, figures["category skip"], key=f"{P}_categories")
show_chart(left, figures["position skip"], key=f"{P}_positions")
left.caption("Position is the token's index in its item (absolute, not relative): token 0 is the attention sink "
             "and skips most FFNs; the routers were trained on 128-token blocks, so skip can drift past 128.")
show_chart(right, figures["item quality"], key=f"{P}_items")

st.subheader("Quality against dense, and at matched compute")
show_chart(st, figures["ratio to dense"], key=f"{P}_ratio")
st.dataframe(quality, hide_index=True, key=f"{P}_quality_table", column_config=ds.QUALITY_COLUMNS)
comparison = result.matched()
if len(comparison):
    st.dataframe(comparison, hide_index=True, key=f"{P}_matched_table", column_config=ds.MATCHED_COLUMNS)
    st.caption("ppl ratio vs reference: perplexity of the run over the reference's on the same items at (nearly) the "
               "same param skip, with its 95 % bootstrap interval over items; above 1 the reference is better.")

st.subheader("Items")
ds.item_table(result, runs, chat=chat, prefix=P)

st.subheader("Export")
cols = st.columns(4)
for i, (table, fmt) in enumerate((("items", "csv"), ("items", "parquet"), ("tokens", "csv"), ("tokens", "parquet"))):
    frame = getattr(result, table)
    cols[i].download_button(f"{table.title()} ({fmt.upper()})", data=lambda f=frame, k=fmt: table_bytes(f, k),
                            file_name=safe_filename("hero-lens", "dataset", table, ext=fmt), on_click="ignore",
                            mime="text/csv" if fmt == "csv" else "application/vnd.apache.parquet",
                            key=f"{P}_dl_{table}_{fmt}")
export_panel(None, figures, key=f"{P}_export", context="dataset")
