"""The answers-kept figure draws every run with a defined answers kept, and nothing from a report without one."""

from hero_core.eval.answers.figure import kept_points, plot_answers_kept


def _report(kept, skip=0.08, dense_correct=10):
    low = None if kept is None else max(0.0, kept - 0.2)
    high = None if kept is None else min(1.0, kept + 0.1)
    return {"overall": {"kept": kept, "kept_low": low, "kept_high": high, "answer_param_skip": skip,
                        "dense_correct": dense_correct}}


def test_points_are_percent_and_leave_out_runs_without_a_defined_answers_kept():
    answers = {"kept": {"hero-10": _report(0.9, 0.081), "local-10@hero-10": _report(0.5, 0.079),
                        "hero-40": _report(None, 0.4, dense_correct=0)}}
    points = {p["method"]: p for p in kept_points(answers)}
    assert set(points) == {"hero-10", "local-10@hero-10"}
    assert abs(points["hero-10"]["x"] - 8.1) < 1e-9 and points["hero-10"]["y"] == 90.0
    assert points["local-10@hero-10"]["low"] == 30.0


def test_the_figure_is_written_only_when_there_is_something_to_draw(tmp_path):
    assert not plot_answers_kept({"kept": {"hero-40": _report(None, dense_correct=0)}}, tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()
    assert plot_answers_kept({"kept": {"hero-10": _report(0.9)}}, tmp_path / "one.png")
    assert (tmp_path / "one.png").stat().st_size > 10_000


def test_the_random_reference_is_drawn_and_the_caption_stops_calling_it_not_run(tmp_path, monkeypatch):
    from hero_core.eval.answers import figure as answers_figure

    captions = []
    import matplotlib.figure

    original = matplotlib.figure.Figure.text
    monkeypatch.setattr(matplotlib.figure.Figure, "text",
                        lambda self, x, y, s, *a, **k: captions.append(s) or original(self, x, y, s, *a, **k))
    assert plot_answers_kept({"kept": {"hero-10": _report(0.9)}}, tmp_path / "a.png")
    assert answers_figure.RANDOM_NOTE in captions[-1] and answers_figure.ORACLE_NOTE in captions[-1]
    assert plot_answers_kept({"kept": {"hero-10": _report(0.9), "random@hero-10": _report(0.4)}}, tmp_path / "b.png")
    assert answers_figure.RANDOM_NOTE not in captions[-1] and answers_figure.ORACLE_NOTE in captions[-1]
    assert answers_figure.is_reference("random@hero-10") and not answers_figure.is_reference("local-10@hero-10")
    assert plot_answers_kept({"kept": {"hero-10": _report(0.9), "oracle@hero-10": _report(0.8)}}, tmp_path / "c.png")
    assert answers_figure.RANDOM_NOTE in captions[-1] and answers_figure.ORACLE_NOTE not in captions[-1]
    assert answers_figure.is_reference("oracle@hero-10")
