"""``deepsent analyze``: gates, keywords, topics and cost curves of a trained model (paper section V-A)."""
from __future__ import annotations

import argparse
from typing import Any

from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.errors import ConfigError


class _QueryAction(argparse.Action):
    """``--query Q`` starts a new example; the ``--title`` flags after it belong to it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option_string: str | None = None) -> None:
        examples = list(getattr(namespace, "examples", None) or [])
        examples.append({"query": value, "titles": []})
        namespace.examples = examples


class _TitleAction(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option_string: str | None = None) -> None:
        examples = getattr(namespace, "examples", None)
        if not examples:
            parser.error("--title must follow a --query")
        examples[-1]["titles"].append(value)


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``analyze`` to the CLI."""
    p = subparsers.add_parser(
        "analyze", parents=[common], help="look inside a trained LSTM/RNN: gates, keywords, topics, cost curves",
        description="Trace example (query, title) pairs through a logged lstm, bilstm or rnn model and write an HTML "
        "report (gate heatmaps as the paper's Figs. 4-6, keyword tables I-II, topic table III, training cost Fig. 7) "
        "to reports/analysis/<run-id>/index.html in the store and to the model's MLflow run. Without --query, "
        "a few dev-set queries with their best- and worst-graded title are used.",
    )
    p.add_argument("--model-uri", required=True, help="runs:/<id>/model, models:/<name>/<version>, or a run id")
    p.add_argument("--query", dest="examples", action=_QueryAction, metavar="Q", help="an example query (repeatable)")
    p.add_argument("--title", action=_TitleAction, metavar="T", help="a title shown with the preceding --query (repeatable)")
    p.add_argument("--examples", type=v.up_to(100), default=3, dest="example_count", metavar="N",
                   help="without --query: how many dev-set queries to show (default 3)")
    p.add_argument("--compare-uri", help="a second model (e.g. the RNN) for side-by-side keyword counts and cost curves")
    p.add_argument("--topic-query", action="append", dest="topic_queries", metavar="Q",
                   help="a query for the topic table (repeatable; default 40 dev-set queries)")
    p.add_argument("--threshold", type=v.positive_share, default=None,
                   help="keyword detection: share of a cell's range of y a word must move it by (default 0.2)")
    p.set_defaults(handler=run_analyze, examples=None)


def run_analyze(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Build the analysis report and say where it is."""
    from encoders.analysis.report import Example, analyze
    from encoders.analysis.traces import DEFAULT_THRESHOLD

    examples = None
    if args.examples:
        missing = [e["query"] for e in args.examples if not e["titles"]]
        if missing:
            raise ConfigError(f"--query {missing[0]!r} has no --title after it")
        examples = [Example(e["query"], tuple((t, f"title {k + 1}") for k, t in enumerate(e["titles"])))
                    for e in args.examples]
    threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    return analyze(settings, args.model_uri, examples, args.compare_uri, args.topic_queries, threshold, args.example_count)
